# Rack oversubscription: images/s of 64 nodes in racks of 8 against the uplinks'
# oversubscription ratio, per scheme, from scripts/racks_oversub.sh's table.
# usage: gnuplot -e "csv='out/experiments/racks-vgg19-table.csv'; out='out/reports/racks-vgg19'; model='vgg19'" reports/racks.gp
# The table: oversubscription, then images/s of ps+wfbp, sfb+wfbp, allreduce+wfbp, hybrid,
# hybrid3 (then hybrid3's layers per method, not plotted). Writes OUT.png and OUT.svg.
set datafile separator ","
set grid ytics
set key below horizontal maxrows 2 box
set bmargin 8
set logscale x 2
set xlabel "oversubscription of the rack uplinks (a rack's NICs : its uplink)"
set ylabel "images/s, all 64 nodes"
set title sprintf("%s, 64 nodes in racks of 8, 40 GbE\n(simulated; batch 32 per node)", model)
set xrange [0.8:20]
set yrange [0:*]
set xtics (1, 2, 4, 8, 16)
do for [fmt in "pngcairo svg"] {
    if (fmt eq "svg") { set terminal svg size 820,620 dynamic; set output out.".svg" } \
    else { set terminal pngcairo size 820,620; set output out.".png" }
    plot for [i=2:6] csv using 1:i with linespoints lc i-1 pt i+2 ps 1.3 title columnheader(i)
    unset output
}
