# filter.awk keeps a `go test -v` run of the e2e suite readable (make e2e):
# as they come, it prints the RUN/PASS/FAIL lines, the log lines of test
# files and anything printed outside a test (TestMain's messages); after a
# panic, everything. At the end it prints the whole output — bridge logs
# included — of every top-level test that failed, so a red CI run shows why.
{
	if ($0 ~ /^=== RUN/) { top = $3; sub(/\/.*/, "", top) }
	if (top != "") out[top] = out[top] $0 "\n"
	if (dump || top == "" || $0 ~ /^(=== RUN| *--- |PASS|FAIL|ok|panic)|_test\.go/) { print; fflush() }
	if ($0 ~ /^panic: /) dump = 1
	if (match($0, /--- FAIL: [^ ]+/)) {
		name = substr($0, RSTART + 10, RLENGTH - 10); sub(/\/.*/, "", name)
		if (!(name in failed)) { failed[name] = 1; order[++nfailed] = name }
	}
	if ($0 ~ /^--- (PASS|FAIL|SKIP): /) top = ""  # back outside any test
}
END {
	for (i = 1; i <= nfailed; i++) {
		print "\n===== the whole output of " order[i] " ====="
		printf "%s", out[order[i]]
	}
}
