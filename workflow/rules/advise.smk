# Stage: advice (not in `all`). `sm advise` writes what `gradsched advise` recommends for a
# committed case: ResNet-18 (batch 16 per rank) on 2 gloo ranks over loopback, with the
# calibrated interference of that network. Replay only (seconds, no real processes);
# `--validate`, which runs the ranks for real, is left to the user.


rule advise_example:
    """The DDP bucket cap to use and whether the gradsched plan beats it (text + JSON)."""
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


rule advise:
    """gradsched advise on a committed case (results/advise/example.txt)."""
    input:
        rules.advise_example.output,
