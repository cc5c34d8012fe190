//! Arrow schema of the frame files and LeRobot's feature description of it.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use parquet::schema::types::ColumnPath;
use serde_json::{json, Value};

use super::layout::{FrameCodec, IMAGE_KEY, REWARD_KEY, STATE_KEY};

/// LeRobot's image feature is the `datasets.Image` struct: PNG `bytes` and an optional `path`.
fn image_struct() -> DataType {
    DataType::Struct(Fields::from(vec![
        Field::new("bytes", DataType::Binary, true),
        Field::new("path", DataType::Utf8, true),
    ]))
}

/// Schema of `data/…/file-…parquet`: `observation.image`, `timestamp` (f32 s), `frame_index`,
/// `episode_index`, `index`, `task_index` (int64), as LeRobot writes them; with
/// `state_columns`, then the nullable `observation.state` (list of f32, its width per task)
/// and `reward` (f32). Datasets made before these columns existed keep the schema without them.
pub fn data_schema(codec: FrameCodec, frame_len: usize, state_columns: bool) -> SchemaRef {
    let image = match codec {
        FrameCodec::Png => Field::new(IMAGE_KEY, image_struct(), true),
        FrameCodec::Raw => Field::new(IMAGE_KEY, DataType::FixedSizeBinary(frame_len as i32), false),
    };
    let mut fields = vec![
        image,
        Field::new("timestamp", DataType::Float32, false),
        Field::new("frame_index", DataType::Int64, false),
        Field::new("episode_index", DataType::Int64, false),
        Field::new("index", DataType::Int64, false),
        Field::new("task_index", DataType::Int64, false),
    ];
    if state_columns {
        fields.push(Field::new(STATE_KEY, state_type(), true));
        fields.push(Field::new(REWARD_KEY, DataType::Float32, true));
    }
    let mut metadata = HashMap::new();
    if codec == FrameCodec::Png {
        // Hugging Face `datasets` reads its feature types from this key, so the image column
        // loads as `Image()` without being told.
        let value = |dtype: &str| json!({"dtype": dtype, "_type": "Value"});
        let mut features = json!({
            IMAGE_KEY: {"_type": "Image"},
            "timestamp": value("float32"),
            "frame_index": value("int64"),
            "episode_index": value("int64"),
            "index": value("int64"),
            "task_index": value("int64"),
        });
        if state_columns {
            // `Sequence` of a value is a variable-length list to every `datasets` version
            // (4.0 calls it `List` and still reads this name).
            features[STATE_KEY] = json!({"_type": "Sequence", "feature": value("float32")});
            features[REWARD_KEY] = value("float32");
        }
        metadata.insert(
            "huggingface".to_string(),
            json!({"info": {"features": features}}).to_string(),
        );
    }
    Arc::new(Schema::new_with_metadata(fields, metadata))
}

/// The state column's type: a list of f32 (one row of the episode's state, `state_names` wide).
pub fn state_type() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::Float32, true)))
}

/// The image column's leaf paths (no dictionary, no statistics on them).
pub fn image_columns(codec: FrameCodec) -> Vec<ColumnPath> {
    match codec {
        FrameCodec::Png => vec![
            ColumnPath::new(vec![IMAGE_KEY.into(), "bytes".into()]),
            ColumnPath::new(vec![IMAGE_KEY.into(), "path".into()]),
        ],
        FrameCodec::Raw => vec![ColumnPath::new(vec![IMAGE_KEY.into()])],
    }
}

/// What `meta/info.json` says about the `observation.state` column.
pub struct StateFeature<'a> {
    /// The width, when every task with state has the same one. Otherwise (or when no episode
    /// has state yet) the shape is [-1]: LeRobot gives a feature one shape, and reads -1 as a
    /// list of any length (`datasets.Sequence(length=-1)`), so it still loads the frames.
    pub dim: Option<usize>,
    /// The value names, when every task with state has the same ones.
    pub names: Option<&'a [String]>,
}

/// `features` of `meta/info.json`.
/// `state` is None for a dataset without the state columns (made by an older lfs): every
/// column must be described, or LeRobot's loader refuses the files.
pub fn lerobot_features(codec: FrameCodec, width: u32, height: u32, state: Option<StateFeature>) -> Value {
    let scalar = |dtype: &str| json!({"dtype": dtype, "shape": [1], "names": null});
    let image = match codec {
        FrameCodec::Png => {
            json!({"dtype": "image", "shape": [height, width, 3], "names": ["height", "width", "channels"]})
        }
        // Not a LeRobot dtype on purpose: LeRobot cannot decode raw frames.
        FrameCodec::Raw => {
            json!({"dtype": "uint8", "shape": [height, width, 3], "names": ["height", "width", "channels"]})
        }
    };
    let mut features = json!({
        IMAGE_KEY: image,
        "timestamp": scalar("float32"),
        "frame_index": scalar("int64"),
        "episode_index": scalar("int64"),
        "index": scalar("int64"),
        "task_index": scalar("int64"),
    });
    if let Some(StateFeature { dim, names }) = state {
        let dim = dim.map_or(-1, |d| d as i64);
        features[STATE_KEY] = json!({"dtype": "float32", "shape": [dim], "names": names});
        features[REWARD_KEY] = scalar("float32");
    }
    features
}
