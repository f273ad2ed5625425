#!/usr/bin/awk -f
# awk -F_ over job ids sorted by array and task: one <array>_[<ranges>] per array, then the plain ids
# comma-separated (the scontrol release expressions of open-gates.sh).
function add() { r = r (r == "" ? "" : ",") (lo == hi ? lo : lo "-" hi) }
function flush() { if (a != "") { add(); print a "_[" r "]" }; a = "" }
NF == 1 { p = p (p == "" ? "" : ",") $1; next }
$1 != a { flush(); a = $1; lo = $2; hi = $2; r = ""; next }
$2 == hi + 1 { hi = $2; next }
{ add(); lo = $2; hi = $2 }
END { flush(); if (p != "") print p }
