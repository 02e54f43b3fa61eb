# Worker whose result is larger than any sensible cap: 100000 "x" then a
# three-byte character.
cat >/dev/null
head -c 100000 /dev/zero | tr '\0' x
printf '\342\202\254'
