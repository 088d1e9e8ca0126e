# error_summary CSV LABEL KEEP [D]: the median and worst |error| of the rows of a validate.sh
# table (CSV: error in column 7, host_bound in 8, devices per node in 9) whose host_bound
# matches KEEP ("any": all rows), of D devices per node when given; returns 1 when no row
# matches. Shared by validate.sh and paper_grid.sh.
error_summary() {
    awk -F, -v k="$3" -v d="${4:-}" 'NR > 1 && (k == "any" || $8 == k) && (d == "" || $9 == d) {
        e = $7 < 0 ? -$7 : $7; print e }' "$1" |
        sort -g | awk -v l="$2" '
        { v[NR] = $1 } END {
            if (NR == 0) { printf "|error| over %s: no rows\n", l; exit 1 }
            med = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            printf "|error| over %d %s: median %.1f%%, worst %.1f%%\n", NR, l, med * 100, v[NR] * 100 }'
}
