# Worker that leaves behind a process outside its process group (setsid)
# holding its stdout open, then exits: sleeps for $1 seconds.
cat >/dev/null
setsid sleep "$1" &
sleep 0.5 # time for setsid to leave the group before the group is killed
echo started
