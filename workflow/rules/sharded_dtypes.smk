# Stage: the collectives' dtypes (FSDP2's MixedPrecisionPolicy, torchao's float8 all-gather)
# with FSDP2's and torchtitan's layouts (gradsched shard dtypes): one LLM, 512 GPUs, two GPU
# types. Compute: the FLOPs model of `gradsched traces flops` (modelled, not measured);
# collectives: the at-scale study's scaled models (measured on 16 GPUs, extrapolated to 512:
# every row says so). Seconds and bytes; in `all` through TABLES.

SHARDED_DTYPES_CASES = {
    "llama70b-h100-s8192": {
        "model": "llama-3.1-70b",
        "gpu": "h100",
        "seq_len": 8192,
        "comm": f"{RESULTS}/at-scale/p5-h100.scaled.json",
    },
    "llama70b-a100-s4096": {
        "model": "llama-3.1-70b",
        "gpu": "a100",
        "seq_len": 4096,
        "comm": f"{RESULTS}/extrapolate/abci-a100-ib.scaled.json",
    },
}
SHARDED_DTYPES_P = 512
SHARDED_DTYPES_CASE_RE = "|".join(SHARDED_DTYPES_CASES)  # names only: no dots, no regex

TABLES.append("sharded-dtypes")


rule sharded_dtypes_case:
    """Each case's compute trace (micro-batch 1, full recomputation; FLOPs model), then every
    policy with every layout replayed on it: one job."""
    input:
        sorted({c["comm"] for c in SHARDED_DTYPES_CASES.values()}),
    output:
        [
            f"{RESULTS}/sharded-dtypes/{case}{ext}"
            for case in SHARDED_DTYPES_CASES
            for ext in (".trace.csv", ".trace.meta.json", ".csv")
        ],
    log:
        f"{LOGS}/sharded-dtypes/batch.log",
    params:
        jobs=batch_lines(
            [
                (
                    f"{LOGS}/sharded-dtypes/{case}.trace.log",
                    f"traces flops --model {c['model']} --gpu {c['gpu']} "
                    f"--seq-len {c['seq_len']} --checkpointing full "
                    f"-o {RESULTS}/sharded-dtypes/{case}.trace.csv",
                )
                for case, c in SHARDED_DTYPES_CASES.items()
            ]
            + [
                (
                    f"{LOGS}/sharded-dtypes/{case}.log",
                    f"shard dtypes --compute {RESULTS}/sharded-dtypes/{case}.trace.csv "
                    f"--comm {c['comm']} --world-size {SHARDED_DTYPES_P} --label {case} "
                    f"-o {RESULTS}/sharded-dtypes/{case}.csv",
                )
                for case, c in SHARDED_DTYPES_CASES.items()
            ]
        ),
    shell:
        BATCH


report_step(
    f"{LOGS}/sharded-dtypes/collect.log",
    "report concat {input} -o {output.csv}",
    [f"{RESULTS}/sharded-dtypes/{case}.csv" for case in SHARDED_DTYPES_CASES],
    csv=f"{RESULTS}/sharded-dtypes/sharded-dtypes.csv",
)


report_step(
    f"{LOGS}/tables/sharded-dtypes.log",
    "report sharded-dtypes-table --input {input} --tex {output.tex} --md {output.md} "
    "--title 'Collective dtypes and published FSDP2 layouts, replayed'",
    [f"{RESULTS}/sharded-dtypes/sharded-dtypes.csv"],
    tex=f"{TAB}/sharded-dtypes.tex",
    md=f"{TAB}/sharded-dtypes.md",
)
