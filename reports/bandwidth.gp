# Speedup at 16 nodes versus NIC bandwidth, from `poseidon sim --csv` of experiments/bandwidth.exp.
# usage: gnuplot -e "csv='out/experiments/bandwidth-vgg19.csv'; name='vgg19'; out='out/reports/bandwidth-vgg19'" reports/bandwidth.gp
set datafile separator ","
set key outside right top box
set grid
set xlabel "NIC bandwidth (Gbit/s)"
set ylabel "speedup over 1 node"
set title sprintf("%s: 16 simulated Titan X nodes, bandwidth sweep", name)
set logscale x 2
set xrange [1.5:50]
set yrange [0:18]
schemes = "ps ps+wfbp hybrid allreduce+wfbp"
sel(s) = (strcol(4) eq s) ? $9 : 1/0
do for [fmt in "pngcairo svg"] {
    if (fmt eq "svg") { set terminal svg size 800,560 dynamic; set output out.".svg" } \
    else { set terminal pngcairo size 800,560; set output out.".png" }
    plot 16 title "ideal (16)" with lines dt 2 lc rgb "gray", \
         for [i=1:words(schemes)] csv using 3:(sel(word(schemes,i))) with linespoints lc i pt 7 \
             title word(schemes,i)
    unset output
}
