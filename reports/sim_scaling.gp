# Simulator time and memory per iteration against nodes, one line per network, scheme
# and bandwidth, from scripts/bench_sim.sh's CSV (default network model rows, exact max-min:
# net_model starting with "auto"; the grouped model's rows at 1,024 and 10,000 nodes as
# points; 100,000 GPUs, 12,544 nodes of 8 devices, as triangles: filled when the run ended,
# open when it was stopped at the bench's limit, its CPU time then a lower bound).
# usage: gnuplot -e "csv='out/bench/sim.csv'; out='out/reports/sim-scaling'" reports/sim_scaling.gp
# Columns used: 1 model, 2 nodes, 3 gbps, 4 scheme, 5 net_model, 6 status, 12 sim_rss_MB,
# 13 cpu_s (CPU time of the run: on a machine shared with other jobs the wall time of a
# one-core run mostly measures the wait for a core), 14 extra (the grid's lines: the rows
# without other overrides, "-"). Writes OUT.png and OUT.svg.
set datafile separator ","
set grid
set logscale xy
set xrange [6:20000]
set xlabel "simulated nodes"
set key outside right top
set rmargin at screen 0.70  # both panels alike: the legends sit right of it
nets = "vgg19 resnet-152 googlenet inception-v3"
confs = "hybrid/10 hybrid/40 ps/10 ps/40"
is(m, c, nm) = strcol(1) eq m && strcol(4)."/".strcol(3) eq c && strcol(6) eq "ok" && \
               strcol(5)[1:strlen(nm)] eq nm && strcol(14) eq "-"
big(st, col) = column(2) == 12544 && strcol(6) eq st ? column(col) : 1/0
cpu(m, c, nm) = is(m, c, nm) ? column(13) : 1/0
mem(m, c, nm) = is(m, c, nm) ? column(12) : 1/0
do for [fmt in "pngcairo svg"] {
    if (fmt eq "svg") { set terminal svg size 1100,900 dynamic; set output out.".svg" } \
    else { set terminal pngcairo size 1100,900; set output out.".png" }
    set multiplot layout 2,1 title "poseidon sim, a warm-up and one iteration, one core (lines: exact max-min, the default; points: grouped model)"
    set ylabel "CPU time (s)"
    plot for [i=1:words(nets)] for [j=1:words(confs)] csv \
             using 2:(cpu(word(nets,i), word(confs,j), "auto")) with linespoints lc i dt j pt 7 \
             notitle, \
         for [i=1:words(nets)] for [j=1:words(confs)] csv \
             using 2:(cpu(word(nets,i), word(confs,j), "whole")) with points lc i pt 6 ps 1.5 \
             notitle, \
         csv using 2:(big("ok", 13)) with points lc rgb "black" pt 9 ps 2 \
             title "100k GPUs", \
         csv using 2:(big("timeout", 13)) with points lc rgb "red" pt 8 ps 2 \
             title "100k GPUs, stopped", \
         1 with lines lc rgb "gray" dt 2 title "1 s", 60 with lines lc rgb "gray" dt 3 title "60 s"
    set ylabel "memory beyond the bare binary (MB)"  # its legend names the lines of both
    plot for [i=1:words(nets)] for [j=1:words(confs)] csv \
             using 2:(mem(word(nets,i), word(confs,j), "auto")) with linespoints lc i dt j pt 7 \
             title word(nets,i)." ".word(confs,j), \
         csv using 2:(big("ok", 12)) with points lc rgb "black" pt 9 ps 2 notitle, \
         csv using 2:(big("timeout", 12)) with points lc rgb "red" pt 8 ps 2 notitle
    unset multiplot
    unset output
}
