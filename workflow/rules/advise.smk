# Stage: advice (not in `all`). `sm advise` writes what `gradsched advise` recommends for
# committed cases. Replay only (seconds, no real processes); `--validate`, which runs the
# ranks for real, is left to the user.
#   * example: ResNet-18 (batch 16 per rank) on 2 gloo ranks over loopback, with the
#     calibrated interference of that network (the advice: keep torch's default; every
#     alternative is within the 5 % margin).
#   * list-example: ResNet-18 (batch 16 per rank) on 4 gloo ranks over the emulated
#     100 Mbit/s network, the committed case where per-bucket caps gain most over the best
#     uniform cap (+2.3 % predicted); with the 5 % default margin the advice is to keep the
#     default, so this example passes --margin-pct 2 (a user's choice, labelled in the text)
#     to show the bucket_cap_mb_list recommendation and its paste line.


rule advise_example:
    """The DDP setting to use and whether anything beats it by the margin (text + JSON)."""
    input:
        compute="traces/compute/cpu/resnet18-b16-cpu-fp32.csv",
        comm="traces/comm/cpu/gloo-loopback-p2.csv",
        interference="paper/data/reexec/interference-loopback-p2.json",
    output:
        text=f"{RESULTS}/advise/example.txt",
        json=f"{RESULTS}/advise/example.json",
    log:
        f"{LOGS}/advise/example.log",
    shell:
        "{GS} advise --compute {input.compute} --comm {input.comm} "
        "--interference {input.interference} --json {output.json} "
        "> {output.text}.tmp 2> {log} && mv {output.text}.tmp {output.text}"


rule advise_list_example:
    """Per-bucket caps (bucket_cap_mb_list) recommended at a 2 % margin (text + JSON)."""
    input:
        compute="traces/compute/cpu/resnet18-b16-cpu-fp32.csv",
        comm="traces/comm/cpu/gloo-tbf100mbit-p4.csv",
    output:
        text=f"{RESULTS}/advise/list-example.txt",
        json=f"{RESULTS}/advise/list-example.json",
    log:
        f"{LOGS}/advise/list-example.log",
    shell:
        "{GS} advise --compute {input.compute} --comm {input.comm} --margin-pct 2 "
        "--json {output.json} > {output.text}.tmp 2> {log} "
        "&& mv {output.text}.tmp {output.text}"


rule advise:
    """gradsched advise on committed cases (results/advise/*.txt)."""
    input:
        rules.advise_example.output,
        rules.advise_list_example.output,


# LLM scale (in `all` via TABLES): what `advise` and `advise --sharded` answer for the
# published LLaMA-2-70B, GPT-3-175B and DeepSeek-V3 shapes at 1,024 ranks. Compute: the FLOPs
# model of `gradsched traces flops` (modelled, not measured; the parameter lists come from
# the published configurations, no torch needed). Communication: the two-level NCCL model
# calibrated on the ABCI A100 2-node sweep (nccl.smk), far beyond what it measured; its
# measured extrapolation error (4-16 nodes) is the band of every number in the table.
LLM_MODELS = ("llama-2-70b", "gpt3-175b", "deepseek-v3")
LLM_WORLD = 1024
LLM_COMM = f"{RESULTS}/nccl/models/abci-a100.json"
TABLES.append("llm-scale")


rule llm_trace:
    """A compute trace of each published LLM shape from the FLOPs model (labelled
    synthetic), in one job."""
    output:
        [
            f"{RESULTS}/llm/{llm}.{ext}"
            for llm in LLM_MODELS
            for ext in ("csv", "meta.json")
        ],
    log:
        f"{LOGS}/llm/trace.batch.log",
    params:
        jobs=batch_lines(
            (
                f"{LOGS}/llm/{llm}-trace.log",
                f"traces flops --model {llm} -o {RESULTS}/llm/{llm}.csv",
            )
            for llm in LLM_MODELS
        ),
    shell:
        BATCH


rule llm_advise:
    """advise (DDP's caps, the per-bucket caps, the gradsched plan) on an LLM shape."""
    input:
        compute=f"{RESULTS}/llm/{{llm}}.csv",
        comm=LLM_COMM,
    output:
        text=f"{RESULTS}/llm/{{llm}}-advise.txt",
        json=f"{RESULTS}/llm/{{llm}}-advise.json",
    log:
        f"{LOGS}/llm/{{llm}}-advise.log",
    wildcard_constraints:
        llm="|".join(LLM_MODELS),
    params:
        world=LLM_WORLD,
    shell:
        "{GS} advise --compute {input.compute} --comm {input.comm} "
        "--world-size {params.world} --json {output.json} "
        "> {output.text}.tmp 2> {log} && mv {output.text}.tmp {output.text}"


rule llm_advise_sharded:
    """advise --sharded (FSDP2 layouts under the trace GPU's memory) on an LLM shape."""
    input:
        compute=f"{RESULTS}/llm/{{llm}}.csv",
        comm=LLM_COMM,
    output:
        text=f"{RESULTS}/llm/{{llm}}-sharded.txt",
        json=f"{RESULTS}/llm/{{llm}}-sharded.json",
    log:
        f"{LOGS}/llm/{{llm}}-sharded.log",
    wildcard_constraints:
        llm="|".join(LLM_MODELS),
    params:
        world=LLM_WORLD,
    shell:
        "{GS} advise --sharded --compute {input.compute} --comm {input.comm} "
        "--world-size {params.world} --json {output.json} "
        "> {output.text}.tmp 2> {log} && mv {output.text}.tmp {output.text}"


# One row per LLM shape: DDP and FSDP2 advice at 1,024 ranks (LaTeX + Markdown).
report_step(
    f"{LOGS}/tables/llm-scale.log",
    f"report llm-scale --model {' '.join(LLM_MODELS)} "
    f"--advice {' '.join(expand(rules.llm_advise.output.json, llm=LLM_MODELS))} "
    f"--sharded {' '.join(expand(rules.llm_advise_sharded.output.json, llm=LLM_MODELS))} "
    "--tex {output.tex} --md {output.md}",
    [
        *expand(rules.llm_advise.output.json, llm=LLM_MODELS),
        *expand(rules.llm_advise_sharded.output.json, llm=LLM_MODELS),
    ],
    tex=f"{TAB}/llm-scale.tex",
    md=reported(f"{TAB}/llm-scale.md", "llm-scale", "LLM scale"),
)
