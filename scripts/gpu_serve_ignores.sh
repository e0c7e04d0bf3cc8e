#!/usr/bin/env bash
# Prints the pytest arguments that leave out the serve test files where this machine lacks what they import at
# collection (textual-serve, aiohttp, aiohttp_jinja2; an H200 had aiohttp but not aiohttp_jinja2), and says so
# on stderr. None of them holds a GPU test; without this pytest stops at the collection error before any test.
# Used by gpu_suite.sh and gpu_suite_split.sh:  IGNORES=$(bash scripts/gpu_serve_ignores.sh)
if ! python3 -c "import aiohttp, aiohttp_jinja2, textual_serve" 2>/dev/null; then
    echo "no textual-serve/aiohttp/aiohttp_jinja2 here: the serve test files are not collected" >&2
    echo "--ignore=tests/tui/test_serve_auth.py --ignore=tests/tui/test_serve.py --ignore=tests/tui/test_chaos_serve.py"
fi
