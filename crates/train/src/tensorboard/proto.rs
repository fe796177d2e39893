//! The protobuf messages of a TensorBoard event file, with TensorBoard's field numbers
//! (`tensorboard/compat/proto/event.proto`, `summary.proto`): only the fields liandan writes.

/// One record of an event file (`tensorboard.Event`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Event {
    /// Seconds since the Unix epoch.
    #[prost(double, tag = "1")]
    pub wall_time: f64,
    #[prost(int64, tag = "2")]
    pub step: i64,
    #[prost(oneof = "event::What", tags = "3, 5")]
    pub what: Option<event::What>,
}

pub mod event {
    /// What an [`Event`](super::Event) carries.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum What {
        /// The first event of a file: `brain.Event:2`.
        #[prost(string, tag = "3")]
        FileVersion(String),
        #[prost(message, tag = "5")]
        Summary(super::Summary),
    }
}

/// Tagged values of one step (`tensorboard.Summary`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Summary {
    #[prost(message, repeated, tag = "1")]
    pub value: Vec<summary::Value>,
}

pub mod summary {
    /// One tagged value (`tensorboard.Summary.Value`).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Value {
        #[prost(string, tag = "1")]
        pub tag: String,
        #[prost(oneof = "value::Kind", tags = "2, 5")]
        pub kind: Option<value::Kind>,
    }

    pub mod value {
        /// A scalar or a histogram.
        #[derive(Clone, PartialEq, prost::Oneof)]
        pub enum Kind {
            #[prost(float, tag = "2")]
            SimpleValue(f32),
            #[prost(message, tag = "5")]
            Histo(super::super::HistogramProto),
        }
    }
}

/// A histogram (`tensorboard.HistogramProto`): bucket `i` counts the values in
/// `(bucket_limit[i - 1], bucket_limit[i]]`, the first from minus infinity.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HistogramProto {
    #[prost(double, tag = "1")]
    pub min: f64,
    #[prost(double, tag = "2")]
    pub max: f64,
    #[prost(double, tag = "3")]
    pub num: f64,
    #[prost(double, tag = "4")]
    pub sum: f64,
    #[prost(double, tag = "5")]
    pub sum_squares: f64,
    #[prost(double, repeated, tag = "6")]
    pub bucket_limit: Vec<f64>,
    #[prost(double, repeated, tag = "7")]
    pub bucket: Vec<f64>,
}
