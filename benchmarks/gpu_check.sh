#!/usr/bin/env bash
# The GPU checks of issue 26, as one prepared script for a lent GPU machine (never CI).
#
# Run from the repository root on the GPU machine, with:
#   .devdata/real/gpt2_small_wpe.npy   the real table (copied from ../shared for the trip, git-ignored)
#   .devdata/whl/*.whl                 wheels the machine's image lacks (gguf, plotly), optional
# Writes its logs under $OUT (default ./out/gpu): the CUDA tests, bench_verdicts --device cuda, and a profile
# of one GPU analyze.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
if ls .devdata/whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .devdata/whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD
mkdir -p ../shared/data/real && cp .devdata/real/* ../shared/data/real/
python3 -c "import torch, numpy, pos_geometry; print('torch', torch.__version__, 'numpy', numpy.__version__, torch.cuda.get_device_name())" | tee -a "$OUT/gpu.txt"

timeout 150 python3 -m pytest -q -p no:cacheprovider -m "slow or not slow" \
    tests/analysis/nulls/test_null_device.py tests/hidden/test_device.py tests/analysis/test_results_contract.py \
    tests/atlas/test_position_qk.py -k "cuda or device or gpu or Device" 2>&1 | tee "$OUT/pytest.log"

timeout 200 python3 benchmarks/bench_verdicts.py --device cuda --repeats 5 --no-write 2>&1 | tee "$OUT/bench.log"

timeout 120 python3 - <<'EOF' 2>&1 | tee "$OUT/profile.txt"
import cProfile, pstats, time
import numpy as np, torch
import pos_geometry as pg
from pos_geometry.analysis.nulls import helix_test as _helix_test, basis as _null_basis
x = torch.from_numpy(np.load("../shared/data/real/gpt2_small_wpe.npy")).cuda()
pg.analyze(x[:128], n_surrogates=9, alpha=0.1, progress=False)
for i in range(3):
    _null_basis._memory.last = None; _helix_test.rotation_scan.cache_clear()
    torch.cuda.synchronize(); t = time.perf_counter()
    a = pg.analyze(x, progress=False); torch.cuda.synchronize()
    print(f"analyze on cuda: {time.perf_counter() - t:.3f} s")
_null_basis._memory.last = None; _helix_test.rotation_scan.cache_clear()
p = cProfile.Profile(); p.enable(); pg.analyze(x, progress=False); torch.cuda.synchronize(); p.disable()
pstats.Stats(p).sort_stats("cumulative").print_stats(45)
pstats.Stats(p).sort_stats("tottime").print_stats(25)
_null_basis._memory.last = None; _helix_test.rotation_scan.cache_clear()
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    pg.analyze(x, progress=False); torch.cuda.synchronize()
print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=20, max_name_column_width=50))
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20, max_name_column_width=50))
EOF

for i in 1 2 3; do
    s=$EPOCHREALTIME
    python3 -m pos_geometry analyze gpt2=../shared/data/real/gpt2_small_wpe.npy --offline --device auto > "$OUT/cli.txt" 2>&1
    rc=$? e=$EPOCHREALTIME
    python3 -c "print(f'cli analyze --device auto (whole process): {$e - $s:.2f} s, rc $rc')" | tee -a "$OUT/cli_time.txt"
done

