#!/usr/bin/env bash
# Where a machine has no bubblewrap (the lent GPU machine), use one carried in .deps/bwrap: Debian's
# bubblewrap .deb and its libraries, unpacked with dpkg -x. Prints the export to evaluate:
#   eval "$(bash scripts/carried_bwrap.sh)"
cd "$(dirname "$0")/.."
if command -v bwrap >/dev/null || [ ! -x .deps/bwrap/usr/bin/bwrap ]; then
  exit 0
fi
wrapper="${TMPDIR:-/tmp}/course-bwrap"
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' \
  "$PWD/.deps/bwrap/lib/x86_64-linux-gnu:$PWD/.deps/bwrap/usr/lib/x86_64-linux-gnu" \
  "$PWD/.deps/bwrap/usr/bin/bwrap" > "$wrapper"
chmod +x "$wrapper"
echo "export COURSE_BWRAP=$wrapper"
