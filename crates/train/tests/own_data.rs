//! `ImageFolder` and `CsvTable` on files written here: classes from folder names and labels,
//! decoding in the loader's workers, resizing, normalization and hold-outs, and the errors a
//! user's files can cause.
#![cfg(all(feature = "image-folder", feature = "csv"))]

use std::path::Path;

use image::{ImageFormat, Rgb, RgbImage};
use liandan_backend_cpu as _;
use liandan_train::data::{load_image, CsvTable, DataInfo, DataLoader, Dataset, ImageFolder, ImageFolderConfig, ImageShape};
use liandan_train::nn::Device;

/// A `w` x `h` image of one color, as PNG or JPEG by the file's extension.
fn solid(path: &Path, w: u32, h: u32, color: [u8; 3]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let format = if path.extension().unwrap() == "png" { ImageFormat::Png } else { ImageFormat::Jpeg };
    RgbImage::from_pixel(w, h, Rgb(color)).save_with_format(path, format).unwrap();
}

/// `root/{cat,dog,fish}`: three images each, PNG and JPEG of several sizes, and one file in
/// `dog/` that is not an image at all.
fn three_classes(root: &Path) {
    for (class, color) in [("cat", [250, 10, 10]), ("dog", [10, 250, 10]), ("fish", [10, 10, 250])] {
        solid(&root.join(class).join("a.png"), 12, 9, color);
        solid(&root.join(class).join("b.jpg"), 8, 8, color);
        solid(&root.join(class).join("nested/c.PNG"), 5, 20, color);
    }
    std::fs::write(root.join("dog/broken.png"), b"these bytes are not a PNG").unwrap();
    std::fs::write(root.join("cat/notes.txt"), b"not an image, not read").unwrap();
}

fn rgb(side: usize) -> ImageFolderConfig {
    ImageFolderConfig::new(ImageShape::new(3, side, side).unwrap())
}

#[test]
fn an_image_folder_takes_its_classes_from_folders_and_leaves_out_what_does_not_decode() {
    let dir = tempfile::tempdir().unwrap();
    three_classes(dir.path());
    let (train, val) = ImageFolder::split(dir.path(), &rgb(6)).unwrap();
    assert_eq!(train.classes(), ["cat", "dog", "fish"]);
    assert_eq!(train.len() + val.len(), 9);
    assert_eq!(val.len(), 2); // 20% of 9, rounded
    let bad = train.unreadable();
    assert_eq!(bad.len(), 1);
    assert!(bad[0].path.ends_with("dog/broken.png") && !bad[0].reason.is_empty(), "{bad:?}");

    // The mean and std are the training images', per channel, and normalize both splits.
    let raw: Vec<Vec<f32>> = (0..train.len()).map(|i| load_image(train.path(i).unwrap(), train.shape()).unwrap()).collect();
    for c in 0..3 {
        let values: Vec<f64> = raw.iter().flat_map(|v| v[c * 36..(c + 1) * 36].iter().map(|&x| f64::from(x))).collect();
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let std = (values.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / values.len() as f64).sqrt();
        assert!((f64::from(train.mean()[c]) - mean).abs() < 1e-5 && (f64::from(train.std()[c]) - std).abs() < 1e-5, "channel {c}");
        assert_eq!((train.mean()[c], train.std()[c]), (val.mean()[c], val.std()[c]));
    }
    let s = train.get(0).unwrap();
    assert_eq!(s.shape, [3, 6, 6]);
    assert!((s.input[0] - (raw[0][0] - train.mean()[0]) / train.std()[0]).abs() < 1e-6);
    for i in 0..train.len() {
        let want = ["cat", "dog", "fish"].iter().position(|c| train.path(i).unwrap().starts_with(dir.path().join(c))).unwrap();
        assert_eq!(train.get(i).unwrap().target, want as i64);
    }

    // Decoded on the loader's worker threads into batches.
    let loader = DataLoader::new(train.clone(), 3, &Device::cpu()).unwrap().shuffle(3).workers(2);
    let batches: Vec<_> = loader.iter(0).unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(batches.iter().map(|b| b.target.shape()[0]).sum::<usize>(), train.len());
    assert_eq!(batches[0].input.shape(), &[3, 3, 6, 6]);

    // The hold-out is the seed's: the same seed gives the same split.
    let (again, _) = ImageFolder::split(dir.path(), &rgb(6)).unwrap();
    assert_eq!(
        (0..again.len()).map(|i| again.path(i).unwrap().to_path_buf()).collect::<Vec<_>>(),
        (0..train.len()).map(|i| train.path(i).unwrap().to_path_buf()).collect::<Vec<_>>()
    );

    // Grayscale for a one-channel model; a mean and std given are used as they are.
    let mut gray = ImageFolderConfig::new(ImageShape::new(1, 4, 4).unwrap());
    gray.normalize = Some((vec![0.5], vec![0.25]));
    let (g, _) = ImageFolder::split(dir.path(), &gray).unwrap();
    assert_eq!(g.get(0).unwrap().shape, [1, 4, 4]);
    assert_eq!((g.mean(), g.std()), (&[0.5][..], &[0.25][..]));
}

#[test]
fn images_are_scaled_to_cover_the_input_then_center_cropped() {
    let dir = tempfile::tempdir().unwrap();
    // 16 x 8: the left half red, the right half blue. Scaled to 8 x 4, then the middle 4 x 4.
    let mut img = RgbImage::new(16, 8);
    for (x, _, px) in img.enumerate_pixels_mut() {
        *px = if x < 8 { Rgb([255, 0, 0]) } else { Rgb([0, 0, 255]) };
    }
    let path = dir.path().join("wide.png");
    img.save(&path).unwrap();
    let v = load_image(&path, ImageShape::new(3, 4, 4).unwrap()).unwrap();
    assert_eq!(v.len(), 48);
    for y in 0..4 {
        assert_eq!((v[y * 4], v[32 + y * 4]), (1.0, 0.0), "row {y}: the crop's left column is red");
        assert_eq!((v[y * 4 + 3], v[32 + y * 4 + 3]), (0.0, 1.0), "row {y}: its right column is blue");
    }
    let err = load_image(&dir.path().join("missing.png"), ImageShape::new(1, 4, 4).unwrap()).unwrap_err().to_string();
    assert!(err.contains("missing.png"), "{err}");
}

#[test]
fn train_and_val_folders_are_used_as_they_are_and_bad_layouts_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for split in ["train", "val"] {
        solid(&root.join(split).join("ant/1.png"), 4, 4, [1, 2, 3]);
        solid(&root.join(split).join("bee/1.jpg"), 4, 4, [200, 100, 0]);
    }
    solid(&root.join("train/bee/2.png"), 4, 4, [9, 9, 9]);
    let (train, val) = ImageFolder::split(root, &rgb(4)).unwrap();
    assert_eq!((train.len(), val.len()), (3, 2));
    assert!(val.path(0).unwrap().starts_with(root.join("val")));

    // A checkpoint's classes fix the labels, whatever the folders' order.
    let mut config = rgb(4);
    config.classes = Some(vec!["bee".into(), "ant".into()]);
    let v = ImageFolder::new(root.join("val"), &config).unwrap();
    assert_eq!((v.get(0).unwrap().target, v.get(1).unwrap().target), (1, 0));
    config.classes = Some(vec!["bee".into()]);
    let err = ImageFolder::new(root.join("val"), &config).err().unwrap().to_string();
    assert!(err.contains("ant") && err.contains("not one of the model's classes"), "{err}");

    // A class folder of validation images that training does not have.
    solid(&root.join("val/wasp/1.png"), 4, 4, [0, 0, 0]);
    let err = ImageFolder::split(root, &rgb(4)).err().unwrap().to_string();
    assert!(err.contains("wasp"), "{err}");
    std::fs::remove_dir_all(root.join("val/wasp")).unwrap();

    // An empty class folder is named.
    std::fs::create_dir_all(root.join("train/empty")).unwrap();
    std::fs::write(root.join("train/empty/readme.md"), b"").unwrap();
    let err = ImageFolder::split(root, &rgb(4)).err().unwrap().to_string();
    assert!(err.contains("train/empty") && err.contains("no PNG or JPEG") && err.contains("1 other file"), "{err}");

    // No class folders at all, and a folder whose only images do not decode.
    let flat = tempfile::tempdir().unwrap();
    solid(&flat.path().join("loose.png"), 4, 4, [0, 0, 0]);
    let err = ImageFolder::split(flat.path(), &rgb(4)).err().unwrap().to_string();
    assert!(err.contains("no class folders") && err.contains("one folder of images per class"), "{err}");
    std::fs::create_dir_all(flat.path().join("junk")).unwrap();
    std::fs::write(flat.path().join("junk/x.jpg"), b"no").unwrap();
    let err = ImageFolder::split(flat.path(), &rgb(4)).err().unwrap().to_string();
    assert!(err.contains("none of its images could be decoded"), "{err}");
}

const IRIS: &str = "\
name,sepal_length,petal_length,species
a,5.1,1.4,setosa
b,7.0,4.7,versicolor
c,6.3,6.0,virginica
d,4.9,1.4,setosa
e,6.4,4.5,versicolor
f,5.8,5.1,virginica
";

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_csv_table_has_numeric_features_standardized_on_its_training_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "iris.csv", IRIS);
    let table = CsvTable::open(&path, "species").unwrap();
    assert_eq!(table.features(), ["sepal_length", "petal_length"]);
    assert_eq!(table.skipped_columns(), ["name"]);
    assert_eq!(table.classes(), ["setosa", "versicolor", "virginica"]);
    assert_eq!((table.len(), table.line(0), table.line(5)), (6, Some(2), Some(7)));
    let (train, val) = table.split(0.5, 7).unwrap();
    assert_eq!((train.len(), val.len()), (3, 3));
    let rows: Vec<Vec<f32>> = (0..train.len()).map(|i| train.get(i).unwrap().input).collect();
    for j in 0..2 {
        let mean: f32 = rows.iter().map(|r| r[j]).sum::<f32>() / 3.0;
        let var: f32 = rows.iter().map(|r| (r[j] - mean) * (r[j] - mean)).sum::<f32>() / 3.0;
        assert!(mean.abs() < 1e-5 && (var - 1.0).abs() < 1e-4, "feature {j}: mean {mean}, var {var}");
    }
    assert_eq!(val.mean(), train.mean());

    // Read back as a trained model describes it: columns by name, the label column optional.
    let info = train.info();
    assert_eq!(DataInfo::from_metadata(&info.to_metadata()).unwrap(), Some(info.clone()));
    let new = write(dir.path(), "new.csv", "petal_length,extra,sepal_length\n1.4,x,5.1\n");
    let again = CsvTable::open_like(&new, &info).unwrap();
    let s = again.get(0).unwrap();
    assert_eq!(s.target, -1);
    let row = CsvTable::open_like(&path, &info).unwrap().get(0).unwrap();
    assert_eq!((s.input, row.target), (row.input, 0));

    // Numeric labels sort by value.
    let numbers = write(dir.path(), "n.csv", "x,label\n1,10\n2,2\n3,10\n");
    assert_eq!(CsvTable::open(&numbers, "label").unwrap().classes(), ["2", "10"]);
}

#[test]
fn a_bad_table_is_an_error_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    for (text, needle) in [
        ("1.0,2.0,0\n3.0,4.0,1\n", "a header row is required"),
        ("x,y,label\n1,2,a\n3,4\n", "line 3: 2 fields, but the header row names 3 columns"),
        ("x,y,label\n1,2,a\n3,four,b\n", "line 3: column `y` holds `four`, not a finite number"),
        ("x,y,label\n1,2,a\n3,,b\n", "line 3: column `y` is empty"),
        ("x,y,label\n1,2,a\n3,4,\n", "line 3: the label (column `label`) is empty"),
        ("x,y,kind\n1,2,a\n", "no column `label`"),
        ("x,y,label\n", "no rows of data"),
        ("", "the file is empty"),
        ("x,x,label\n1,2,a\n", "names column `x` twice"),
        ("name,label\nbob,a\n", "no numeric columns"),
    ] {
        let path = write(dir.path(), "t.csv", text);
        let err = CsvTable::open(&path, "label").err().unwrap_or_else(|| panic!("{text:?} opened")).to_string();
        assert!(err.contains(needle) && err.contains("t.csv"), "{text:?}: {err}");
    }
}
