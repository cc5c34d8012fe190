//! `meta/tasks.parquet`: LeRobot keeps tasks in a pandas DataFrame indexed by the task string
//! (`index.name == "task"`) with one column `task_index`. Parquet has no index, so pandas
//! stores it as a column and names it in the `pandas` schema metadata; we write the same.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use serde_json::json;

use super::{open_parquet, writer_props};
use crate::{Error, Result};

/// Write `tasks` (position = task_index) atomically.
pub fn write_tasks(path: &Path, tasks: &[String]) -> Result<()> {
    let pandas = json!({
        "index_columns": ["task"],
        "column_indexes": [{"name": null, "field_name": null, "pandas_type": "unicode",
                            "numpy_type": "object", "metadata": {"encoding": "UTF-8"}}],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64",
             "numpy_type": "int64", "metadata": null},
            {"name": "task", "field_name": "task", "pandas_type": "unicode",
             "numpy_type": "object", "metadata": null}
        ],
        "creator": {"library": "lfs", "version": env!("CARGO_PKG_VERSION")},
        "pandas_version": "2.2.0"
    });
    let schema = Arc::new(Schema::new_with_metadata(
        vec![
            Field::new("task_index", DataType::Int64, false),
            Field::new("task", DataType::Utf8, false),
        ],
        HashMap::from([("pandas".to_string(), pandas.to_string())]),
    ));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(0..tasks.len() as i64)),
        Arc::new(StringArray::from_iter_values(tasks)),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns)?;
    crate::fsutil::write_atomic(path, |file| {
        let mut w =
            ArrowWriter::try_new(file.try_clone()?, schema, Some(writer_props(&[]))).map_err(std::io::Error::other)?;
        w.write(&batch).map_err(std::io::Error::other)?;
        w.close().map_err(std::io::Error::other)?;
        Ok(())
    })?;
    Ok(())
}

/// Read the task strings in task_index order.
pub fn read_tasks(path: &Path) -> Result<Vec<String>> {
    let reader = open_parquet(path)?.build()?;
    let mut pairs = Vec::new();
    for batch in reader {
        let batch = batch?;
        let idx = batch
            .column_by_name("task_index")
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>().cloned());
        let task = batch
            .column_by_name("task")
            .and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned());
        let (Some(idx), Some(task)) = (idx, task) else {
            return Err(Error::shard(
                path,
                "expected columns task_index (int64) and task (string)",
            ));
        };
        for i in 0..batch.num_rows() {
            pairs.push((idx.value(i), task.value(i).to_string()));
        }
    }
    pairs.sort();
    Ok(pairs.into_iter().map(|(_, t)| t).collect())
}
