# Worker that succeeds: prints its assignment, then its working directory.
cat
echo "done in $(pwd)"
