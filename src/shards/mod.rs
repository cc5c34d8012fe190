//! Frame shards: Parquet files in the LeRobot v3.0 dataset layout, written by `lfs ingest`
//! and read by the pre-trainer. See [`layout`] for the folder structure.

mod episodes;
mod files;
pub mod layout;
mod reader;
mod render_quality;
mod schema;
mod state;
pub mod stats;
mod tasks;
mod writer;

pub use episodes::{read_episodes, EpisodeRecord, SourceInfo};
pub use layout::{FileId, FrameCodec, LfsMeta};
pub use reader::{Dataset, Episode};
pub use render_quality::{render_quality_conflict, RenderQualities};
pub use schema::data_schema;
pub use state::{count_mismatch, rewards_f32, EpisodeState};
pub use stats::FeatureStats;
pub use writer::{encode_frames, info_fps, source_rates, DatasetWriter, EncodedFrames, NewEpisode, WriterSettings};

use std::fs::File;
use std::path::Path;

use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

/// Parquet settings for every file we write: zstd, and for the listed (image) columns no
/// dictionary and no statistics (min/max of PNG bytes are useless and cost space).
pub(crate) fn writer_props(binary_columns: &[ColumnPath]) -> WriterProperties {
    // Invariant: 3 is a valid zstd level.
    let level = ZstdLevel::try_new(3).expect("zstd level 3 is valid");
    let mut b = WriterProperties::builder().set_compression(Compression::ZSTD(level));
    for col in binary_columns {
        b = b
            .set_column_dictionary_enabled(col.clone(), false)
            .set_column_statistics_enabled(col.clone(), EnabledStatistics::None);
    }
    b.build()
}

/// Opens the Parquet file at `path` for reading; errors name the file.
pub(crate) fn open_parquet(path: &Path) -> crate::Result<ParquetRecordBatchReaderBuilder<File>> {
    let file = File::open(path).map_err(|e| crate::Error::shard(path, format!("cannot open: {e}")))?;
    ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| crate::Error::shard(path, format!("not a readable Parquet file: {e}")))
}
