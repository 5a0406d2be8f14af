# Stage: tables (booktabs LaTeX for the paper + Markdown for humans).

TABLE_INPUTS = {
    "captured-compute": f"{RESULTS}/traces/captured.csv",
    "captured-comm": f"{RESULTS}/traces/captured.csv",
    "fits": f"{RESULTS}/fit/fits.csv",
    "crossws": f"{RESULTS}/fit/crossws.csv",
    "replay": f"{RESULTS}/replay/main/replay.csv",
    "compare": f"{RESULTS}/compare/compare.csv",
}
TABLE_TITLES = {
    "captured-compute": "Compute traces captured here",
    "captured-comm": "Collective sweeps captured here",
    "fits": "Held-out MAPE of each fitted model per comm trace",
    "crossws": "Cross-world-size prediction error",
    "replay": "Replayed iteration time per algorithm and case",
    "compare": "Reproduced vs published numbers",
}


rule table:
    """One table from its result CSV."""
    input:
        lambda wc: TABLE_INPUTS[wc.table],
    output:
        tex=f"{TAB}/{{table}}.tex",
        md=report(
            f"{TAB}/{{table}}.md",
            caption="../report/tables.rst",
            category="Tables",
            labels={"table": "{table}"},
        ),
    log:
        f"{LOGS}/tables/{{table}}.log",
    wildcard_constraints:
        table="|".join(TABLE_INPUTS),
    params:
        title=lambda wc: TABLE_TITLES[wc.table],
    shell:
        "{GS} report table {wildcards.table} --input {input} --tex {output.tex} "
        "--md {output.md} --title {params.title:q} > {log} 2>&1"


rule traces_inventory:
    """One row per captured trace: what was measured, how, and its quality checks."""
    input:
        CAPTURED_TRACES,
    output:
        f"{RESULTS}/traces/captured.csv",
    log:
        f"{LOGS}/tables/traces-inventory.log",
    shell:
        "{GS} traces inventory {input} -o {output} > {log} 2>&1"
