# Sourced by scripts/fresh-check.sh and tests/kit/kit_in_fresh_root.sh, which make fresh minbase Debian roots.

# The Debian mirror this machine's apt sources already use (deb822 .sources or one-line lists).
mirror_url() {
  local f url
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    url=$(awk '/^URIs:/ {u = $2} /^Suites:/ && / bookworm( |$)/ {print u; exit}' "$f")
    [ -n "$url" ] && { echo "$url"; return; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    url=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' "$f")
    [ -n "$url" ] && { echo "$url"; return; }
  done
  echo http://deb.debian.org/debian
}

# Everything mounted at or under the root, deepest first (from /proc/self/mountinfo; field 5).
mounts_under_root() {
  awk -v r="$root" '$5 == r || index($5, r "/") == 1 {print $5}' /proc/self/mountinfo | sort -r
}
