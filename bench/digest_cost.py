"""The cost of the content digests on a finished run: content_digest over every .pt file (once per
write and once per read: reads counted from the run's Snakemake log, every job's input .pt files),
and Parquet reads with and without page-checksum verification; against the run's wall time."""
import glob, json, os, re, sys, time
import pyarrow.parquet as pq
import torch
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "src"))
from polyinterp.io import content_digest

run = sys.argv[1]
wall = float(sys.argv[2])
log = sorted(glob.glob(f"{run}/.snakemake/log/*.snakemake.log"))[-1]
text = open(log).read()
reads = {}
for block in re.findall(r"^\s+input: (.*)$", text, re.M):
    for p in block.split(", "):
        if p.endswith(".pt"):
            reads[p] = reads.get(p, 0) + 1
digest, n, size, weighted = 0.0, 0, 0, 0.0
for path in glob.glob(f"{run}/results/**/*.pt", recursive=True):
    obj = torch.load(path, weights_only=True)
    t = time.perf_counter(); content_digest(obj); dt = time.perf_counter() - t
    rel = os.path.relpath(path, run)
    digest += dt; weighted += dt * (1 + reads.get(rel, 0)); n += 1; size += os.path.getsize(path)
pq_plain = pq_checked = 0.0
files = glob.glob(f"{run}/results/**/*.parquet", recursive=True)
for _ in range(3):
    for path in files:
        t = time.perf_counter(); pq.read_table(path); pq_plain += time.perf_counter() - t
        t = time.perf_counter(); pq.read_table(path, page_checksum_verification=True); pq_checked += time.perf_counter() - t
extra_pq = max(pq_checked - pq_plain, 0) / 3
print(json.dumps({"pt_files": n, "pt_MB": round(size / 1e6), "pt_reads": sum(reads.values()),
                  "digest_once_s": round(digest, 2), "digest_write_and_reads_s": round(weighted, 2),
                  "parquet_files": len(files), "parquet_checksum_extra_s": round(extra_pq, 3),
                  "share_of_wall": round((weighted + extra_pq) / wall, 5)}))
