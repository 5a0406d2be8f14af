#!/bin/bash
# Snakemake's shell for `tools/cpu_by_rule.py run`: called as `<rule> -c CMD` through a link
# named after the rule; runs CMD under bash as Snakemake would (set -euo pipefail) and appends
# "rule<TAB>user_s<TAB>sys_s<TAB>wall_s" (GNU time: the command and all its children) to
# $GRADSCHED_CPU_LOG.
rule=$(basename "$0")
exec /usr/bin/time -a -o "${GRADSCHED_CPU_LOG:?}" -f "${rule}	%U	%S	%e" \
  /bin/bash -c "set -euo pipefail; $2"
