#!/usr/bin/env bash
# Builds the user guide (docs/guide, an mdBook) and fails on a broken relative link:
# the field reference is generated from docs/schema first (scripts/guide_fields.py), then
# `mdbook build`, then scripts/guide_links.py over the HTML. scripts/deps.sh installs mdbook.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 scripts/guide_fields.py
mdbook build docs/guide
python3 scripts/guide_links.py docs/guide/book
