# Stage: the report steps every stage registered with `report_step` (common.smk), in one
# job: tables, macros and concats, each with its own log, in registration order.

_REPORT_OUTPUTS = [out for *_, outs in REPORT_STEPS for out in outs]


rule report_batch:
    """The registered report steps (REPORT_STEPS) in one `gradsched batch` job."""
    input:
        sorted(
            {path for *_, ins, _ in REPORT_STEPS for path in ins}
            - {str(out) for out in _REPORT_OUTPUTS}
        ),
    output:
        _REPORT_OUTPUTS,
    log:
        f"{LOGS}/report-batch.log",
    params:
        jobs=batch_lines((log, args) for log, args, *_ in REPORT_STEPS),
    shell:
        BATCH
