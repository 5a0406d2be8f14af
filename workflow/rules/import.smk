# Stage: traces. The committed traces are pure inputs; these rules only check them.


rule validate_traces:
    """Validate every configured compute and comm trace (CSV + sidecar)."""
    input:
        compute=sorted(set(config["compute"].values())),
        comm=list(fit_traces().values()),
    output:
        f"{RESULTS}/validate/traces.txt",
    log:
        f"{LOGS}/validate/traces.log",
    shell:
        "{GS} traces validate {input.compute} {input.comm} > {output} 2> {log}"


rule import_check:
    """Re-import every public log of traces/manifest.yaml into results/import/ and compare
    it byte for byte with the committed traces (raw logs: external_dir, data/external).
    """
    input:
        manifest=config.get("compare", {}).get("manifest", "traces/manifest.yaml"),
    output:
        f"{RESULTS}/import/check.txt",
    log:
        f"{LOGS}/import/check.log",
    params:
        src=config.get("external_dir", "data/external"),
        out=f"{RESULTS}/import/traces",
    script:
        "../scripts/import_check.py"
