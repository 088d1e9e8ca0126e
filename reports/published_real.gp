# The papers' scaling figures run for real: measured and simulated speedup over one node, with
# the published points, one panel per network (experiments/published_real.sh writes the data).
# usage: gnuplot -e "csv='DIR/published_real.csv'; out='DIR/published_real'" reports/published_real.gp
# Columns: 1 model, 2 scheme, 3 nodes, 4 measured_speedup, 5 simulated_speedup,
# 6 published_speedup (empty: none), 7 published_by, 8 host_bound (1: the host set the run's
# pace, drawn hollow). Writes OUT.png and OUT.svg.
set datafile separator ","
set datafile missing ""
set grid
set logscale xy 2
set xrange [0.8:40]
set yrange [0.8:40]
set xtics (1, 2, 4, 8, 16, 32)
set ytics (1, 2, 4, 8, 16, 32)
set xlabel "Titan X nodes, 40 GbE"
set ylabel "speedup over 1 node"
set key left top font ",8"
models = "vgg19-22k inception-v3 resnet-152"
schemes = "hybrid ps+wfbp"
pick(m, s, c) = (strcol(1) eq m && strcol(2) eq s) ? column(c) : 1/0
# a measured point by whether the host bound it (hb 0 or 1)
measured(m, s, hb) = (strcol(1) eq m && strcol(2) eq s && column(8) == hb) ? column(4) : 1/0
pub(m, by) = (strcol(1) eq m && strcol(7) eq by && strlen(strcol(6)) > 0) ? $6 : 1/0
do for [fmt in "pngcairo svg"] {
    if (fmt eq "svg") { set terminal svg size 1350,460 dynamic; set output out.".svg" } \
    else { set terminal pngcairo size 1350,460; set output out.".png" }
    set multiplot layout 1,3
    do for [m=1:words(models)] {
        set title word(models, m)
        plot x title "ideal" with lines dt 2 lc rgb "gray", \
             for [i=1:words(schemes)] csv using 3:(pick(word(models,m), word(schemes,i), 5)) \
                 with lines lc i title word(schemes,i)." simulated", \
             for [i=1:words(schemes)] csv using 3:(measured(word(models,m), word(schemes,i), 0)) \
                 with points lc i pt 7 ps 1.2 title word(schemes,i)." measured", \
             for [i=1:words(schemes)] csv using 3:(measured(word(models,m), word(schemes,i), 1)) \
                 with points lc i pt 6 ps 1.2 title word(schemes,i)." measured, host-bound", \
             csv using 3:(pub(word(models,m), "poseidon")) with points lc rgb "black" pt 3 ps 2 \
                 title "published, Poseidon", \
             csv using 3:(pub(word(models,m), "tensorflow")) with points lc rgb "black" pt 4 ps 2 \
                 title "published, TensorFlow (ps)"
    }
    unset multiplot
    unset output
}
