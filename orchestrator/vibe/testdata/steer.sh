# Worker that works (sleeps, with a child of its own) until its assignment
# says "finish", then prints the assignment.
assignment=$(cat)
case "$assignment" in
*finish*) printf '%s\n' "$assignment" ;;
*) sleep 300 & wait ;;
esac
