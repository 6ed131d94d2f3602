#!/bin/bash
# Run-to-run drift of the tuner's times, unheld (--hold-us 0) against held (150 us): three runs
# of each, alternating, measuring the same 40 tile configurations (random sampler, fixed seed)
# of two small shapes in fp16 and bf16. Needs a GPU and $OUT; docs/runs/h200_hold_drift.*
set -u
for r in 1 2 3; do
  for h in 0 150; do
    python3 -m tuner tune --gpu h200 --family tile --shape B=1,T=512,NH=32,NH_KV=8,HD=64 --shape B=1,T=2048,NH=14,NH_KV=2,HD=64 \
      --dtype fp16,bf16 --sampler random --seed 7 --trials 40 --warm-start 0 --no-bundled --storage memory \
      --hold-us $h --results /tmp/drift/h${h}_r${r} --no-progress 2>&1 | tail -3
  done
done
python3 - <<'PY'
import glob, pandas as pd, os
fr = pd.concat([pd.read_parquet(f).assign(run=f.split('/')[3]) for f in glob.glob('/tmp/drift/*/h200/*.parquet')])
fr.to_parquet(os.environ['OUT'] + '/drift.parquet')
ok = fr[fr.status == 'ok']
for (s, d, h), g in ok.groupby(['T', 'dtype', 'hold_us']):
    p = g.pivot_table(index='config_key', columns='run', values='time_ms')
    lvl = p.median()
    print(s, d, h, 'run medians', (lvl / lvl.mean()).round(3).to_dict(), 'copy', g.groupby('run').copy_ms.first().round(5).to_dict())
    rel = p.div(lvl, axis=1)
    print('   per-config spread after run level (median range %):', round(float(((rel.max(1) - rel.min(1)) * 100).median()), 2),
          ' best per run:', p.idxmin().str[-40:].to_dict())
PY
