#!/usr/bin/env bash
# Regenerate the small real-operator panel the README's first command brackets:
# all-MiniLM-L6-v2 on the first 32 tokens of the Apache-2.0 licence text (Debian's
# /usr/share/common-licenses/Apache-2.0, copied to examples/data/apache2.txt), layers 0 and 5,
# heads 0-2: six real operators.
set -euo pipefail
cd "$(dirname "$0")/.."
softrank panel --model minilm --text examples/data/apache2.txt --widths 32 --layers 0,5 --heads 0,1,2 \
  --out examples/panels/minilm-apache2-w32.npz
