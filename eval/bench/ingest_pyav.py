"""The Python baseline for `make bench-ingest`: what `lfs ingest` does, written the usual way.

PyAV decodes (one FFmpeg thread per decoder, one decoder per process), scales with swscale
(bilinear) and centre-crops to 84x84 exactly as lfs does, PIL encodes PNG (compress_level=1,
the fast setting), pyarrow writes one zstd Parquet file with one row group per episode and
the LeRobot columns. Usage:
    python eval/bench/ingest_pyav.py VIDEO_DIR OUT.parquet [--jobs 2]
"""

import argparse
import glob
import io
import os
from multiprocessing import Pool

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

SIZE = 84


def crop_window(w: int, h: int):
    s = max(SIZE / w, SIZE / h)
    sw, sh = max(SIZE, round(w * s)), max(SIZE, round(h * s))
    return sw, sh, (sw - SIZE) // 2, (sh - SIZE) // 2


def decode(path: str):
    pngs, times = [], []
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = 1
        tb = float(stream.time_base)
        first = None
        for frame in container.decode(stream):
            sw, sh, x, y = crop_window(frame.width, frame.height)
            rgb = frame.reformat(width=sw, height=sh, format="rgb24", interpolation="BILINEAR").to_ndarray()
            crop = np.ascontiguousarray(rgb[y : y + SIZE, x : x + SIZE])
            buf = io.BytesIO()
            Image.fromarray(crop).save(buf, format="PNG", compress_level=1)
            pngs.append(buf.getvalue())
            pts = frame.pts if frame.pts is not None else 0
            first = pts if first is None else first
            times.append((pts - first) * tb)
    return pngs, times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("video_dir")
    ap.add_argument("out")
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    args = ap.parse_args()
    files = sorted(p for ext in ("mp4", "mkv") for p in glob.glob(f"{args.video_dir}/**/*.{ext}", recursive=True))
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema(
        [
            ("observation.image", image_type),
            ("timestamp", pa.float32()),
            ("frame_index", pa.int64()),
            ("episode_index", pa.int64()),
            ("index", pa.int64()),
            ("task_index", pa.int64()),
        ]
    )
    writer = pq.ParquetWriter(
        args.out, schema, compression="zstd", use_dictionary=["timestamp"], write_statistics=["timestamp", "frame_index"]
    )
    index = 0
    with Pool(args.jobs) as pool:
        for episode, (pngs, times) in enumerate(pool.imap(decode, files)):
            n = len(pngs)
            table = pa.table(
                {
                    "observation.image": pa.array([{"bytes": b, "path": None} for b in pngs], type=image_type),
                    "timestamp": pa.array(times, type=pa.float32()),
                    "frame_index": pa.array(range(n), type=pa.int64()),
                    "episode_index": pa.array([episode] * n, type=pa.int64()),
                    "index": pa.array(range(index, index + n), type=pa.int64()),
                    "task_index": pa.array([0] * n, type=pa.int64()),
                },
                schema=schema,
            )
            writer.write_table(table)
            index += n
    writer.close()
    print(index)


if __name__ == "__main__":
    main()
