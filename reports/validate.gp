# validate.gp: predicted (simulator) versus measured (runtime on the emulated cluster) time
# per iteration, one point per configuration of experiments/validate.sh, a colour per scheme;
# the diagonal is agreement, the dashed lines +-10%.
#   gnuplot -e "csv='out/validate/validate.csv'; out='out/validate/validate'" reports/validate.gp
# Reads the CSV only: model,nodes,gbps,scheme,predicted_s,measured_s,error.
if (!exists("csv")) csv = 'out/validate/validate.csv'
if (!exists("out")) out = 'out/validate/validate'
set datafile separator ','
set key outside right top box
set logscale xy
set xlabel 'measured time per iteration (s)'
set ylabel 'predicted time per iteration (s)'
set title 'Simulator versus runtime on the emulated cluster'
set grid
stats csv using 6 nooutput
lo = STATS_min / 1.3
hi = STATS_max * 1.3
set xrange [lo:hi]
set yrange [lo:hi]
# Less than a decade on a log axis leaves gnuplot's default with one labelled tick or none:
# label a round linear step instead (about 5 ticks), so every plot reads.
if (hi / lo < 10) {
    raw = (hi - lo) / 5.0
    mag = 10 ** floor(log10(raw))
    step = raw / mag < 1.5 ? mag : raw / mag < 3.5 ? 2 * mag : raw / mag < 7.5 ? 5 * mag : 10 * mag
    start = ceil(lo / step) * step
    set xtics () ; set ytics ()
    do for [i = 0:40] {
        v = start + i * step
        if (v <= hi) { set xtics add (sprintf("%g", v) v); set ytics add (sprintf("%g", v) v) }
    }
    set mxtics 1 ; set mytics 1
}
sel(s) = strcol(4) eq s ? $5 : NaN
do for [fmt in "pngcairo svg"] {
    if (fmt eq "svg") { set terminal svg size 960,640 dynamic; set output out.'.svg' } \
    else { set terminal pngcairo size 960,640; set output out.'.png' }
    plot x title 'predicted = measured' lc rgb 'black', \
         1.1 * x notitle dt 2 lc rgb 'gray', 0.9 * x title '+-10%' dt 2 lc rgb 'gray', \
         csv using 6:(sel('ps')) skip 1 with points pt 7 title 'ps', \
         csv using 6:(sel('ps+wfbp')) skip 1 with points pt 5 title 'ps+wfbp', \
         csv using 6:(sel('hybrid')) skip 1 with points pt 9 title 'hybrid', \
         csv using 6:(sel('allreduce+wfbp')) skip 1 with points pt 13 title 'allreduce+wfbp'
    unset output
}
