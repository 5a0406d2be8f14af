# Stage: diagnose. `gradsched diagnose` on public Kineto traces: one real trace's
# collectives (observed against predicted exposure, causes) and the planted-fault check
# (each fault planted in each trace in memory -- synthetic -- and diagnosed). Two CSVs per
# rule and the paper tables diagnose-collectives and diagnose-planted (in `all` through
# TABLES).

DIAGNOSE_REAL = "data/external/hta/nccl_parser_config/nccl_data.json.gz"
DIAGNOSE_PLANTED = [
    "data/external/hta/nccl_parser_config/nccl_data.json.gz",
    "data/external/param/dlrm_kineto.tar.gz",
    "data/external/hta/trace_diff/control/control.json.gz",
    "data/external/hta/trace_diff/test/test.json.gz",
]
TABLES += ["diagnose-collectives", "diagnose-planted"]


rule diagnose_real:
    """HTA's DDP ResNet-50 rank (A100, NCCL): per collective, observed and predicted."""
    input:
        DIAGNOSE_REAL,
    output:
        csv=f"{RESULTS}/diagnose/hta-ddp-resnet50.csv",
        causes=f"{RESULTS}/diagnose/hta-ddp-resnet50-causes.csv",
        tables=table_files(["diagnose-collectives"]),
    log:
        f"{LOGS}/diagnose/diagnose-real.log",
    shell:
        "{GS} diagnose {input} --csv {output.csv} --causes-csv {output.causes} "
        "--tables {TAB} > {log} 2>&1"


rule diagnose_planted:
    """Each planted fault in each public trace: named or not, false causes."""
    input:
        DIAGNOSE_PLANTED,
    output:
        csv=f"{RESULTS}/diagnose/planted.csv",
        tables=table_files(["diagnose-planted"]),
    log:
        f"{LOGS}/diagnose/diagnose-planted.log",
    shell:
        "{GS} diagnose {input} --planted {output.csv} --tables {TAB} > {log} 2>&1"
