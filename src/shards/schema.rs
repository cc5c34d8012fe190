//! Arrow schema of the frame files and LeRobot's feature description of it.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use parquet::schema::types::ColumnPath;
use serde_json::{json, Value};

use super::layout::{FrameCodec, IMAGE_KEY};

/// LeRobot's image feature is the `datasets.Image` struct: PNG `bytes` and an optional `path`.
fn image_struct() -> DataType {
    DataType::Struct(Fields::from(vec![
        Field::new("bytes", DataType::Binary, true),
        Field::new("path", DataType::Utf8, true),
    ]))
}

/// Schema of `data/…/file-…parquet`: `observation.image`, `timestamp` (f32 s), `frame_index`,
/// `episode_index`, `index`, `task_index` (int64), as LeRobot writes them.
pub fn data_schema(codec: FrameCodec, frame_len: usize) -> SchemaRef {
    let image = match codec {
        FrameCodec::Png => Field::new(IMAGE_KEY, image_struct(), true),
        FrameCodec::Raw => Field::new(IMAGE_KEY, DataType::FixedSizeBinary(frame_len as i32), false),
    };
    let fields = vec![
        image,
        Field::new("timestamp", DataType::Float32, false),
        Field::new("frame_index", DataType::Int64, false),
        Field::new("episode_index", DataType::Int64, false),
        Field::new("index", DataType::Int64, false),
        Field::new("task_index", DataType::Int64, false),
    ];
    let mut metadata = HashMap::new();
    if codec == FrameCodec::Png {
        // Hugging Face `datasets` reads its feature types from this key, so the image column
        // loads as `Image()` without being told.
        let value = |dtype: &str| json!({"dtype": dtype, "_type": "Value"});
        let features = json!({
            IMAGE_KEY: {"_type": "Image"},
            "timestamp": value("float32"),
            "frame_index": value("int64"),
            "episode_index": value("int64"),
            "index": value("int64"),
            "task_index": value("int64"),
        });
        metadata.insert(
            "huggingface".to_string(),
            json!({"info": {"features": features}}).to_string(),
        );
    }
    Arc::new(Schema::new_with_metadata(fields, metadata))
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

/// `features` of `meta/info.json`.
pub fn lerobot_features(codec: FrameCodec, width: u32, height: u32) -> Value {
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
    json!({
        IMAGE_KEY: image,
        "timestamp": scalar("float32"),
        "frame_index": scalar("int64"),
        "episode_index": scalar("int64"),
        "index": scalar("int64"),
        "task_index": scalar("int64"),
    })
}
