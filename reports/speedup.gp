# Speedup over one node versus nodes, one plot per network, from `poseidon sim --csv` output.
# usage: gnuplot -e "csv='out/experiments/scaling-vgg19.csv'; name='vgg19'; out='out/reports/speedup-vgg19'" reports/speedup.gp
# Columns used: 2 nodes, 3 gbps, 4 scheme, 9 speedup. Writes OUT.png and OUT.svg.
set datafile separator ","
set grid
set samples 400
set xlabel "nodes"
set ylabel "speedup over 1 node (images/s)"
set title sprintf("%s: simulated weak scaling, Titan X nodes, batch 32/node", name)
# Log-log: the ideal line is the diagonal and a constant efficiency is a parallel line.
set logscale xy 2
set xrange [1:40]
set yrange [0.8:40]
set xtics (1, 2, 4, 8, 16, 32)
set ytics (1, 2, 4, 8, 16, 32)
set key outside right top box
schemes = "ps ps+wfbp hybrid allreduce+wfbp"
sel(s, g) = (strcol(4) eq s && $3 == g) ? $9 : 1/0
do for [fmt in "pngcairo svg"] {
    if (fmt eq "svg") { set terminal svg size 800,560 dynamic; set output out.".svg" } \
    else { set terminal pngcairo size 800,560; set output out.".png" }
    plot x title "ideal" with lines dt 2 lc rgb "gray", \
         for [i=1:words(schemes)] csv using 2:(sel(word(schemes,i), 40)) with linespoints lc i pt 7 \
             title word(schemes,i)." 40GbE", \
         for [i=1:words(schemes)] csv using 2:(sel(word(schemes,i), 10)) with linespoints lc i pt 6 dt 3 \
             title word(schemes,i)." 10GbE"
    unset output
}
