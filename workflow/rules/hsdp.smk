# Stage: which device mesh (in `all` via TABLES). FSDP2 over every GPU, the same resharded to
# a node after forward (reshard_after_forward=8), and HSDP with shard groups of one or more
# nodes, replayed for Llama 3.1 8B and 70B (the FLOPs model of `traces flops` on the
# committed Hugging Face configs: modelled, not measured) on 64-512 H100s. Communication: the
# two-level NCCL model moved to an HGX H100 node with eight 400 Gbit/s NICs (nccl.smk; a
# proxy calibrated on the ABCI A100 sweep, every world size an extrapolation), each process
# group priced on its share of the nodes (gradsched.costmodel.mesh); and the same calibration
# moved to a node with one 400 Gbit/s NIC (a weaker network, where the mesh matters most).
# Memory per GPU against the H100's 80 GB. Seconds, bytes.
HSDP_MODELS = ("llama-3.1-8b", "llama-3.1-70b")
HSDP_WORLD_SIZES = "64,128,256,512"
HSDP_COMM = [
    f"{RESULTS}/nccl/models/h100-8x400g.json",
    f"{RESULTS}/hsdp/models/h100-1x400g.json",
]
TABLES.append("hsdp")


rule hsdp_trace:
    """A compute trace of a published LLM shape on an H100 (the FLOPs model; synthetic)."""
    output:
        csv=f"{RESULTS}/hsdp/{{llm}}.csv",
        meta=f"{RESULTS}/hsdp/{{llm}}.meta.json",
    log:
        f"{LOGS}/hsdp/{{llm}}-trace.log",
    wildcard_constraints:
        llm="|".join(HSDP_MODELS),
    shell:
        "{GS} traces flops --hf-config {wildcards.llm} --gpu h100 -o {output.csv} "
        "> {log} 2>&1"


rule hsdp_one_nic_model:
    """The NCCL model of the ABCI A100 2-node sweep moved to an H100 node with one NIC."""
    input:
        NCCL_SERIES["abci-a100"]["traces"],
    output:
        f"{RESULTS}/hsdp/models/h100-1x400g.json",
    log:
        f"{LOGS}/hsdp/h100-1x400g.log",
    params:
        fit_on=NCCL_SERIES["abci-a100"]["fit_on"],
    shell:
        "{GS} fit --cross-world-size {input} --fit-on {params.fit_on} "
        "--hardware h100-8x400g:nics_per_node=1 -o {output} > {log} 2>&1"


rule table_hsdp:
    """FSDP vs reshard-to-node vs HSDP per model and world size (CSV, LaTeX, Markdown,
    macros)."""
    input:
        traces=expand(f"{RESULTS}/hsdp/{{llm}}.csv", llm=HSDP_MODELS),
        comm=HSDP_COMM,
    output:
        csv=f"{RESULTS}/hsdp/meshes.csv",
        tex=f"{TAB}/hsdp.tex",
        md=f"{TAB}/hsdp.md",
        macros=f"{GEN}/hsdp-macros.tex",
    log:
        f"{LOGS}/tables/hsdp.log",
    params:
        traces=lambda wc, input: " ".join(f"--compute {t}" for t in input.traces),
        comm=lambda wc, input: " ".join(f"--comm {c}" for c in input.comm),
        worlds=HSDP_WORLD_SIZES,
    shell:
        "{GS} shard mesh {params.traces} {params.comm} --world-sizes {params.worlds} "
        "--gpu-memory 80G -o {output.csv} --tex {output.tex} --md {output.md} "
        "--macros {output.macros} > {log} 2>&1"
