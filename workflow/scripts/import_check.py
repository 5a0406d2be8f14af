"""Thin adapter: re-import the manifest with the gradsched CLI, then compare with traces/.

Writes a summary to the rule's output; fails when a re-imported CSV differs from the
committed one. Skips (with the reason in the output) when the external folder is absent.
"""

import filecmp
import subprocess
import sys
from pathlib import Path

snakemake = globals()["snakemake"]
src = Path(snakemake.params.src)
out = Path(snakemake.params.out)
summary = Path(snakemake.output[0])
log = Path(snakemake.log[0])
log.parent.mkdir(parents=True, exist_ok=True)
summary.parent.mkdir(parents=True, exist_ok=True)

if not src.is_dir():
    message = f"skipped: external folder {src} not found (set external_dir in the config)\n"
    log.write_text(message)
    summary.write_text(message)
    sys.exit(0)

with log.open("w") as handle:
    subprocess.run(
        [sys.executable, "-m", "gradsched", "import", "manifest", snakemake.input.manifest,
         "--src", str(src), "-o", str(out)],
        check=True, stdout=handle, stderr=subprocess.STDOUT,
    )

lines, differ = [], 0
for fresh in sorted(out.rglob("*.csv")):
    committed = Path("traces") / fresh.relative_to(out)
    if not committed.is_file():
        lines.append(f"MISSING  {committed} (re-imported but not committed)")
        differ += 1
    elif filecmp.cmp(fresh, committed, shallow=False):
        lines.append(f"same     {committed}")
    else:
        lines.append(f"DIFFERS  {committed}")
        differ += 1
lines.append(f"{len(lines) - differ} identical, {differ} different")
summary.write_text("\n".join(lines) + "\n")
if differ:
    sys.exit(f"import_check: {differ} re-imported trace(s) differ from traces/; see {summary}")
