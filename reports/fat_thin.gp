# One fat node or many thin ones: images/s of the same 32 GPUs laid out as 32x1, 8x4 and 4x8
# devices per node, per scheme and NIC bandwidth, from scripts/fat_or_thin.sh's CSV.
# usage: gnuplot -e "csv='out/experiments/fat-thin-vgg19-table.csv'; out='out/reports/fat-thin-vgg19'; model='vgg19'" reports/fat_thin.gp
# The table: devices_per_node, then images/s of ps+wfbp, hybrid, allreduce+wfbp at 40 GbE and
# the same at 10 GbE. Writes OUT.png and OUT.svg.
set datafile separator ","
set grid ytics
set key below horizontal maxrows 2 box
set bmargin 8
set xlabel "devices per node (nodes x devices = 32 GPUs)"
set ylabel "images/s, all 32 GPUs"
set title sprintf("%s, 32 GPUs: one fat node or many thin ones\n(simulated; batch 32 per GPU, PCIe 3 inside a node)", model)
set xrange [0.5:3.5]
set yrange [*:*]
set offsets 0, 0, graph 0.08, graph 0.08
set xtics ("32 x 1" 1, "8 x 4" 2, "4 x 8" 3)
pos(d) = d == 1 ? 1 : d == 4 ? 2 : 3
do for [fmt in "pngcairo svg"] {
    if (fmt eq "svg") { set terminal svg size 820,620 dynamic; set output out.".svg" } \
    else { set terminal pngcairo size 820,620; set output out.".png" }
    plot for [i=2:4] csv using (pos($1)):i with linespoints lc i-1 pt 7 \
             title columnheader(i)." GbE", \
         for [i=5:7] csv using (pos($1)):i with linespoints lc i-4 pt 6 dt 3 \
             title columnheader(i)." GbE"
    unset output
}
