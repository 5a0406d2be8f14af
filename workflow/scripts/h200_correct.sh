#!/bin/sh
# Corrected H200 traces: every committed capture whose forward or backward rows differ from
# the hook-free iteration of their run by more than 3 % gets a `-corrected` bundle beside it
# (gradsched traces correct; spread from data/h200/kineto-steps/kineto-steps-summary.json;
# GPU busy fraction, where a hook-free profiled iteration measured it, from data/h200/README.md,
# kineto section: kernel-busy time of the profiled iteration over the unprofiled iteration).
set -eu
D=traces/compute/h200
S=data/h200/kineto-steps/kineto-steps-summary.json
B="data/h200/README.md (kineto: kernel busy / unprofiled iteration)"
c() { stem=$1; shift; python -m gradsched traces correct "$D/$stem.csv" -o "$D/$stem-corrected.csv" --hook-free-summary "$S" "$@"; }
c bert-base-s128-b32-cuda-bf16
c bert-large-s128-b16-cuda-bf16 --gpu-busy 0.36 --gpu-busy-source "$B"
c densenet121-b64-cuda-fp32 --gpu-busy 0.66 --gpu-busy-source "$B"
c gpt2-large-s1024-b4-cuda-bf16
c gpt2-medium-s1024-b8-cuda-bf16
c gpt2-s1024-b8-cuda-bf16
c inception_v3-b64-cuda-fp32
c resnet101-b64-cuda-fp32 --gpu-busy 0.91 --gpu-busy-source "$B"
c vit_b_16-b64-cuda-bf16 --gpu-busy 0.86 --gpu-busy-source "$B"
