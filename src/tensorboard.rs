//! TensorBoard event files, so that `tensorboard --logdir runs/` watches a run or a whole suite:
//! the numbers of the run's JSONL and CSV logs as scalars, at the same x (the update for `lfs
//! pretrain`, the frame for `lfs eval` and `lfs train`, as DrQ-v2 logs them).
//!
//! One file per run directory, [`EVENTS_FILE`]: TensorBoard follows only the last event file of
//! a directory while it is being written, so a run's logs share one ([`SharedEventFile`]). On
//! resume the file is cut back like the logs it mirrors ([`EventFile::open`]), so a killed and
//! resumed run shows each point once.
//!
//! The format: TFRecord framing (a little-endian u64 length, its masked CRC-32C, the bytes,
//! their masked CRC-32C; tensorflow/tsl `record_writer.cc`) around `tensorboard.Event`
//! protobuf messages. The three messages used are declared below with prost, their field
//! numbers as in tensorflow/tensorboard@00342393c3241773100aef37251939d901854415
//! `tensorboard/compat/proto/{event,summary}.proto`.

use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use prost::Message;

use crate::{Error, Result};

/// The event file's name in a run directory (TensorBoard reads files whose name holds
/// "tfevents").
pub const EVENTS_FILE: &str = "events.out.tfevents.lfs";

/// The first record of every event file.
const FILE_VERSION: &str = "brain.Event:2";

/// `tensorboard.Event`: one record.
#[derive(Clone, PartialEq, Message)]
struct Event {
    #[prost(double, tag = "1")]
    wall_time: f64,
    #[prost(int64, tag = "2")]
    step: i64,
    #[prost(oneof = "What", tags = "3, 5")]
    what: Option<What>,
}

/// `Event.what`, the two cases written here.
#[derive(Clone, PartialEq, prost::Oneof)]
enum What {
    #[prost(string, tag = "3")]
    FileVersion(String),
    #[prost(message, tag = "5")]
    Summary(Summary),
}

/// `tensorboard.Summary`.
#[derive(Clone, PartialEq, Message)]
struct Summary {
    #[prost(message, repeated, tag = "1")]
    value: Vec<SummaryValue>,
}

/// `tensorboard.Summary.Value` with its `simple_value` (a member of a oneof, so written even
/// when 0: `optional`).
#[derive(Clone, PartialEq, Message)]
struct SummaryValue {
    #[prost(string, tag = "1")]
    tag: String,
    #[prost(float, optional, tag = "2")]
    simple_value: Option<f32>,
}

/// TFRecord's masked CRC-32C (Castagnoli).
fn masked_crc(bytes: &[u8]) -> u32 {
    const CRC32C: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);
    let crc = CRC32C.checksum(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// One TFRecord: the framed bytes of `event`.
fn frame(event: &Event) -> Vec<u8> {
    let data = event.encode_to_vec();
    let len = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc(&len).to_le_bytes());
    out.extend_from_slice(&data);
    out.extend_from_slice(&masked_crc(&data).to_le_bytes());
    out
}

/// The records of an event file's bytes with their byte ranges, up to the first one that is
/// torn (a kill mid-write) or does not check.
fn records(bytes: &[u8]) -> Vec<(Event, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(header) = bytes.get(at..at + 12) {
        let len_bytes = &header[..8];
        let len = u64::from_le_bytes(len_bytes.try_into().expect("8 bytes")) as usize;
        let len_crc = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
        if masked_crc(len_bytes) != len_crc {
            break;
        }
        let Some(data) = bytes.get(at + 12..(at + 12).saturating_add(len)) else {
            break;
        };
        let Some(data_crc) = bytes.get(at + 12 + len..at + 16 + len) else {
            break;
        };
        if masked_crc(data) != u32::from_le_bytes(data_crc.try_into().expect("4 bytes")) {
            break;
        }
        let Ok(event) = Event::decode(data) else {
            break;
        };
        out.push((event, at..at + 16 + len));
        at += 16 + len;
    }
    out
}

/// A point of the file, as [`EventFile::open`]'s `keep` sees it: a record's x and the tags of
/// its scalars (all from one log line).
pub struct Point<'a> {
    pub x: u64,
    pub tags: &'a [String],
}

/// A run directory's event file, open for appending.
pub struct EventFile {
    path: PathBuf,
    file: std::fs::File,
}

/// The event file a run's logs share.
pub type SharedEventFile = Rc<RefCell<EventFile>>;

impl EventFile {
    /// Opens `dir`'s event file for appending, first dropping the records `keep` rejects (those
    /// past the checkpoint, to be written again) and any torn by a kill; a new file starts with
    /// its version record.
    pub fn open(dir: &Path, keep: impl Fn(Point) -> bool) -> Result<Self> {
        let path = dir.join(EVENTS_FILE);
        let err = |e: std::io::Error| Error::checkpoint(&path, format!("TensorBoard event file: {e}"));
        let mut kept = Vec::new();
        if path.exists() {
            let bytes = std::fs::read(&path).map_err(err)?;
            for (event, range) in records(&bytes) {
                let wanted = match &event.what {
                    Some(What::FileVersion(_)) => true,
                    Some(What::Summary(summary)) => {
                        let tags: Vec<String> = summary.value.iter().map(|v| v.tag.clone()).collect();
                        keep(Point {
                            x: event.step.max(0) as u64,
                            tags: &tags,
                        })
                    }
                    None => false,
                };
                if wanted {
                    kept.extend_from_slice(&bytes[range]);
                }
            }
        }
        if kept.is_empty() {
            kept = frame(&Event {
                wall_time: wall_time(),
                step: 0,
                what: Some(What::FileVersion(FILE_VERSION.into())),
            });
        }
        crate::fsutil::write_bytes_atomic(&path, &kept).map_err(err)?;
        let file = std::fs::OpenOptions::new().append(true).open(&path).map_err(err)?;
        Ok(Self { path, file })
    }

    /// The same, shared by a run's logs.
    pub fn open_shared(dir: &Path, keep: impl Fn(Point) -> bool) -> Result<SharedEventFile> {
        Ok(Rc::new(RefCell::new(Self::open(dir, keep)?)))
    }

    /// Appends one record: `scalars` at `x` (as f32, TensorBoard's `simple_value`).
    pub fn write(&mut self, x: u64, scalars: &[(String, f64)]) -> Result<()> {
        if scalars.is_empty() {
            return Ok(());
        }
        let event = Event {
            wall_time: wall_time(),
            step: x as i64,
            what: Some(What::Summary(Summary {
                value: scalars
                    .iter()
                    .map(|(tag, value)| SummaryValue {
                        tag: tag.clone(),
                        simple_value: Some(*value as f32),
                    })
                    .collect(),
            })),
        };
        // One write per record: a kill tears at most the last, which the next open drops.
        self.file
            .write_all(&frame(&event))
            .map_err(|e| Error::checkpoint(&self.path, format!("TensorBoard event file: {e}")))
    }

    /// Appends a log line's numbers at `x`: every number of the JSON object except the fields
    /// `left_out` names, nested objects as `outer/inner` tags; strings and nulls are left out.
    pub fn write_json(&mut self, x: u64, line: &serde_json::Value, left_out: &[&str]) -> Result<()> {
        let mut scalars = Vec::new();
        scalars_of("", line, &mut scalars);
        scalars.retain(|(tag, _)| !left_out.contains(&tag.as_str()));
        self.write(x, &scalars)
    }
}

/// The numbers of `value` under `prefix`, depth first.
fn scalars_of(prefix: &str, value: &serde_json::Value, out: &mut Vec<(String, f64)>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, inner) in map {
                let tag = match prefix.is_empty() {
                    true => key.clone(),
                    false => format!("{prefix}/{key}"),
                };
                scalars_of(&tag, inner, out);
            }
        }
        serde_json::Value::Number(n) => {
            if let Some(v) = n.as_f64() {
                out.push((prefix.to_string(), v));
            }
        }
        _ => {}
    }
}

/// Seconds since the Unix epoch.
fn wall_time() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scalars of a file, as (x, tag, value).
    fn points(dir: &Path) -> Vec<(u64, String, f32)> {
        let bytes = std::fs::read(dir.join(EVENTS_FILE)).unwrap();
        let mut out = Vec::new();
        for (event, _) in records(&bytes) {
            if let Some(What::Summary(s)) = event.what {
                for v in s.value {
                    out.push((event.step as u64, v.tag, v.simple_value.unwrap()));
                }
            }
        }
        out
    }

    #[test]
    fn the_crc_is_crc32c_masked_as_tfrecord_masks_it() {
        // CRC-32C's check value (the CRC of "123456789") is 0xE3069283; TFRecord's mask,
        // rotate right by 15 and add 0xa282ead8, makes it 0xc78ab0e5 (worked in Python).
        assert_eq!(masked_crc(b"123456789"), 0xc78a_b0e5);
    }

    #[test]
    fn reopening_keeps_what_keep_accepts_and_drops_a_torn_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = EventFile::open(dir.path(), |_| true).unwrap();
        for x in [1u64, 2, 3] {
            f.write_json(
                x * 10,
                &serde_json::json!({"step": x * 10, "a/loss": x as f64 / 2.0, "name": "s", "n": null}),
                &["step"],
            )
            .unwrap();
        }
        f.write(20, &[("eval/r".into(), 0.0)]).unwrap();
        drop(f);
        assert_eq!(
            points(dir.path()),
            vec![
                (10, "a/loss".into(), 0.5),
                (20, "a/loss".into(), 1.0),
                (30, "a/loss".into(), 1.5),
                (20, "eval/r".into(), 0.0)
            ]
        );
        // A kill mid-write: half a record at the end.
        let path = dir.path().join(EVENTS_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let torn = frame(&Event {
            wall_time: 0.0,
            step: 40,
            what: None,
        });
        bytes.extend_from_slice(&torn[..torn.len() - 3]);
        std::fs::write(&path, &bytes).unwrap();
        // Resume at x = 20, evaluations known through 10 only.
        let mut f = EventFile::open(dir.path(), |p| match p.tags.iter().all(|t| t.starts_with("eval/")) {
            true => p.x <= 10,
            false => p.x <= 20,
        })
        .unwrap();
        f.write(30, &[("a/loss".into(), 2.5)]).unwrap();
        drop(f);
        assert_eq!(
            points(dir.path()),
            vec![
                (10, "a/loss".into(), 0.5),
                (20, "a/loss".into(), 1.0),
                (30, "a/loss".into(), 2.5)
            ]
        );
        // The version record stays first, once.
        let bytes = std::fs::read(&path).unwrap();
        let versions: Vec<_> = records(&bytes)
            .into_iter()
            .filter(|(e, _)| matches!(e.what, Some(What::FileVersion(_))))
            .collect();
        assert_eq!(versions.len(), 1);
        assert_eq!(versions[0].1.start, 0);
    }

    #[test]
    fn nested_objects_become_slash_tags() {
        let mut out = Vec::new();
        scalars_of(
            "",
            &serde_json::json!({"probe/tasks": {"walker": {"state_r2": 0.5}}, "x": 1}),
            &mut out,
        );
        assert_eq!(
            out,
            vec![("probe/tasks/walker/state_r2".to_string(), 0.5), ("x".to_string(), 1.0)]
        );
    }
}
