//! The zoo's convolutional models: `mnist_cnn` (pytorch/examples), `seed003_cnn` and the
//! CIFAR `resnet18`.

use liandan_tensor::{Device, Reduction, Tensor};

use super::{class_loss, missing_labels, spec_of, ZooModel, ZooSpec};
use crate::error::Result;
use crate::impl_module;
use crate::layers::{
    AdaptiveMaxPool2d, BatchNorm2d, BatchNorm2dConfig, Conv2d, Conv2dConfig, Dropout, Dropout2d, Flatten, Linear, LinearConfig, MaxPool2d, ReLU, Sequential,
};
use crate::module::Forward;

/// `mnist_cnn`: the network of pytorch/examples' MNIST example (1,199,882 parameters). Ends in
/// `log_softmax`, so it trains with NLL.
///
/// State-dict keys: `conv1.*`, `conv2.*`, `fc1.*`, `fc2.*`.
///
/// # Shapes
/// - input: `[N, 1, 28, 28]`
/// - output: `[N, 10]` log-probabilities (`[N, classes]` from [`MnistCnn::with_classes`])
pub struct MnistCnn {
    pub conv1: Conv2d,
    pub conv2: Conv2d,
    pub dropout1: Dropout,
    pub dropout2: Dropout,
    pub fc1: Linear,
    pub fc2: Linear,
}

impl_module!(MnistCnn { conv1, conv2, dropout1, dropout2, fc1, fc2 });

impl MnistCnn {
    pub fn new(device: &Device) -> Result<MnistCnn> {
        MnistCnn::with_classes(10, device)
    }

    /// The same network with a head of `classes` outputs.
    pub fn with_classes(classes: usize, device: &Device) -> Result<MnistCnn> {
        Ok(MnistCnn {
            conv1: Conv2dConfig::new(1, 32, 3).init(device)?,
            conv2: Conv2dConfig::new(32, 64, 3).init(device)?,
            dropout1: Dropout::new(0.25),
            dropout2: Dropout::new(0.5),
            fc1: LinearConfig::new(9216, 128).init(device)?,
            fc2: LinearConfig::new(128, classes).init(device)?,
        })
    }
}

impl Forward for MnistCnn {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        let x = self.conv1.forward_relu(x)?;
        let x = self.conv2.forward_relu(&x)?.max_pool2d((2, 2), (2, 2), (0, 0), (1, 1))?;
        let x = self.dropout1.forward(&x)?.flatten(1, -1)?;
        let x = self.dropout2.forward(&self.fc1.forward(&x)?.relu()?)?;
        Ok(self.fc2.forward(&x)?.log_softmax(1)?)
    }
}

impl ZooModel for MnistCnn {
    fn spec(&self) -> &'static ZooSpec {
        spec_of("mnist_cnn")
    }

    fn loss(&self, x: &Tensor, y: Option<&Tensor>) -> Result<Tensor> {
        let y = y.ok_or_else(|| missing_labels("mnist_cnn"))?;
        Ok(self.forward(x)?.nll_loss(y, Reduction::Mean)?)
    }
}

/// `seed003_cnn`: a `Sequential` of Conv 1-64 k3, MaxPool 2, Conv 64-512 k3, MaxPool 2,
/// Dropout2d 0.1, AdaptiveMaxPool (1,1), Flatten, Linear 512-1024, ReLU, Linear 1024-10
/// (831,626 parameters).
///
/// State-dict keys: `0.*`, `2.*`, `7.*`, `9.*` (the Sequential's indices).
///
/// # Shapes
/// - input: `[N, 1, 28, 28]`
/// - output: `[N, 10]` logits (`[N, classes]` from [`Seed003Cnn::with_classes`])
pub struct Seed003Cnn(pub Sequential);

impl_module!(Seed003Cnn { inner: 0 });

impl Seed003Cnn {
    pub fn new(device: &Device) -> Result<Seed003Cnn> {
        Seed003Cnn::with_classes(10, device)
    }

    /// The same network with a head of `classes` outputs.
    pub fn with_classes(classes: usize, device: &Device) -> Result<Seed003Cnn> {
        Ok(Seed003Cnn(
            Sequential::new()
                .push(Conv2dConfig::new(1, 64, 3).init(device)?)
                .push(MaxPool2d::new(2))
                .push(Conv2dConfig::new(64, 512, 3).init(device)?)
                .push(MaxPool2d::new(2))
                .push(Dropout2d::new(0.1))
                .push(AdaptiveMaxPool2d::new((1, 1)))
                .push(Flatten::default())
                .push(LinearConfig::new(512, 1024).init(device)?)
                .push(ReLU)
                .push(LinearConfig::new(1024, classes).init(device)?),
        ))
    }
}

impl Forward for Seed003Cnn {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        self.0.forward(x)
    }
}

impl ZooModel for Seed003Cnn {
    fn spec(&self) -> &'static ZooSpec {
        spec_of("seed003_cnn")
    }

    fn loss(&self, x: &Tensor, y: Option<&Tensor>) -> Result<Tensor> {
        class_loss(self.forward(x)?, y, "seed003_cnn")
    }
}

/// ResNet's basic block: two 3x3 convolutions with batch norm, plus the input (through a 1x1
/// convolution and batch norm when the shape changes), then ReLU.
///
/// State-dict keys: `c1.weight`, `b1.*`, `c2.weight`, `b2.*`, and on downsampling blocks
/// `sc.0.weight`, `sc.1.*`.
///
/// # Shapes
/// - input: `[N, in_channels, H, W]`
/// - output: `[N, out_channels, H / stride, W / stride]`
pub struct BasicBlock {
    pub c1: Conv2d,
    pub b1: BatchNorm2d,
    pub c2: Conv2d,
    pub b2: BatchNorm2d,
    /// Empty (the identity) unless the block changes the stride or the channel count.
    pub sc: Sequential,
}

impl_module!(BasicBlock { c1, b1, c2, b2, sc });

impl BasicBlock {
    pub fn new(in_channels: usize, out_channels: usize, stride: usize, device: &Device) -> Result<BasicBlock> {
        let conv = |cin, k, s, p| Conv2dConfig::new(cin, out_channels, k).with_stride((s, s)).with_padding((p, p)).with_bias(false).init(device);
        let bn = || BatchNorm2dConfig::new(out_channels).init(device);
        let mut sc = Sequential::new();
        if stride != 1 || in_channels != out_channels {
            sc = sc.push(conv(in_channels, 1, stride, 0)?).push(bn()?);
        }
        Ok(BasicBlock { c1: conv(in_channels, 3, stride, 1)?, b1: bn()?, c2: conv(out_channels, 3, 1, 1)?, b2: bn()?, sc })
    }
}

impl Forward for BasicBlock {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.b1.forward_relu(&self.c1.forward(x)?)?;
        let h = self.b2.forward(&self.c2.forward(&h)?)?;
        Ok(h.add_relu(&self.sc.forward(x)?)?)
    }
}

/// `resnet18`: the CIFAR ResNet-18 (11,173,962 parameters for 10 classes): a 3x3 stem with 64
/// channels and no max-pool, BasicBlocks [2, 2, 2, 2] at 64/128/256/512 channels, global average
/// pooling and a linear classifier.
///
/// State-dict keys: `stem.0.weight`, `stem.1.*`, `layers.{0..8}.*` (the blocks), `fc.*`.
///
/// # Shapes
/// - input: `[N, 3, 32, 32]` (any size of at least 8x8)
/// - output: `[N, classes]` logits
pub struct ResNet18 {
    pub stem: Sequential,
    pub layers: Sequential,
    pub fc: Linear,
}

impl_module!(ResNet18 { stem, layers, fc });

impl ResNet18 {
    pub fn new(classes: usize, device: &Device) -> Result<ResNet18> {
        let stem = Sequential::new()
            .push(Conv2dConfig::new(3, 64, 3).with_padding((1, 1)).with_bias(false).init(device)?)
            .push(BatchNorm2dConfig::new(64).init(device)?)
            .push(ReLU);
        let mut layers = Sequential::new();
        let mut cin = 64;
        for (cout, stride) in [(64, 1), (128, 2), (256, 2), (512, 2)] {
            layers.add(BasicBlock::new(cin, cout, stride, device)?);
            layers.add(BasicBlock::new(cout, cout, 1, device)?);
            cin = cout;
        }
        Ok(ResNet18 { stem, layers, fc: LinearConfig::new(512, classes).init(device)? })
    }
}

impl Forward for ResNet18 {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.layers.forward(&self.stem.forward(x)?)?;
        self.fc.forward(&h.adaptive_avg_pool2d((1, 1))?.flatten(1, -1)?)
    }
}

impl ZooModel for ResNet18 {
    fn spec(&self) -> &'static ZooSpec {
        spec_of("resnet18")
    }

    fn loss(&self, x: &Tensor, y: Option<&Tensor>) -> Result<Tensor> {
        class_loss(self.forward(x)?, y, "resnet18")
    }
}
