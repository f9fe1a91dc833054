"""Draw docs/synth-pp4-m8.png: 1F1B, ZB-H1 and the schedule `ppdsl synth` finds, at the same memory.

    python tools/synth_figure.py [-o docs/synth-pp4-m8.png]

pp = 4, microbatches = 8, backward_b 1.5, backward_w 0.7 (forward 1), link latency 0.1, and the memory limit of
1F1B and ZB-H1 (4 activations per rank). Each timeline is what `ppdsl plot` draws; this stacks the three.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COST = "forward=1,backward=2.2,backward_b=1.5,backward_w=0.7,latency=0.1"
SIZES = ["--pp", "4", "-m", "8"]


def ppdsl(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "ppdsl.cli", *args], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-o", "--output", default=str(ROOT / "docs" / "synth-pp4-m8.png"))
    args = parser.parse_args()
    from PIL import Image

    with tempfile.TemporaryDirectory() as folder:
        found = Path(folder) / "synth.sched"
        ppdsl("synth", *SIZES, "--cost", COST, "--memory-limit", "4", "-o", str(found))
        pictures = []
        for schedule in ("1f1b", "zbh1", str(found)):
            png = Path(folder) / f"{Path(schedule).stem}.png"
            ppdsl("plot", schedule, *SIZES, "--cost", COST, "--dpi", "80", "-o", str(png))
            pictures.append(Image.open(png).convert("RGB"))
        width = max(p.width for p in pictures)
        stacked = Image.new("RGB", (width, sum(p.height for p in pictures)), "white")
        y = 0
        for picture in pictures:
            stacked.paste(picture, (0, y))
            y += picture.height
        buf = io.BytesIO()
        stacked.save(buf, format="PNG", optimize=True)
        Path(args.output).write_bytes(buf.getvalue())
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
