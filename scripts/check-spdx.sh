#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every source file starts with its SPDX licence line (docs/licensing.md):
#   Rust files   line 1: `// SPDX-License-Identifier: MIT`
#                        (`GPL-2.0-only` in crates/lzo-kernel, `MIT AND BSD-2-Clause` for
#                        crates/compress/src/lz4_kernel.rs, which follows the kernel's lib/lz4);
#   shell files  line 1 or 2 (after `#!`): `# SPDX-License-Identifier: MIT`;
#   C, Go, Java, JavaScript: `// SPDX-...`, Python `# SPDX-...`, SQL `-- SPDX-...` (line 1, or 2
#   after `#!`).
# Checks the files git tracks plus new, not yet ignored ones; prints each offender and fails.
set -euo pipefail
cd "$(dirname "$0")/.."

expected() {
  case $1 in
    crates/lzo-kernel/*) echo "GPL-2.0-only" ;;
    crates/compress/src/lz4_kernel.rs) echo "MIT AND BSD-2-Clause" ;;
    *) echo "MIT" ;;
  esac
}

bad=0
while IFS= read -r f; do
  [ -f "$f" ] || continue
  lic=$(expected "$f")
  case $f in
    *.rs) want="// SPDX-License-Identifier: $lic"; got=$(head -n 1 "$f") ;;
    *.c | *.go | *.java | *.js | *.sql | *.py)
      case $f in
        *.py) want="# SPDX-License-Identifier: $lic" ;;
        *.sql) want="-- SPDX-License-Identifier: $lic" ;;
        *) want="// SPDX-License-Identifier: $lic" ;;
      esac
      got=$(head -n 1 "$f")
      [[ $got == '#!'* ]] && got=$(sed -n 2p "$f")
      ;;
    *)
      want="# SPDX-License-Identifier: $lic"
      got=$(head -n 1 "$f")
      [[ $got == '#!'* ]] && got=$(sed -n 2p "$f")
      ;;
  esac
  if [ "$got" != "$want" ]; then
    echo "$f: first line must be \`$want\`" >&2
    bad=1
  fi
done < <(git ls-files --cached --others --exclude-standard -- '*.rs' '*.sh' '.ci/run' '*.c' '*.go' '*.java' '*.js' '*.sql' '*.py')
exit $bad
