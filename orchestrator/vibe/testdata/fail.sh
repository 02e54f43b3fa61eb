# Worker that fails: some output, an error on stderr, exit status 3.
cat >/dev/null
echo "partial work"
echo "warming up" >&2
echo "compile error: undefined: frobnicate" >&2
exit 3
