# The best scheme's throughput with fp32 and bf16 on the wire against the nodes, at 10 and
# 40 GbE, each point labelled with the scheme that gives it: a column per model, a row per
# kind of node (Titan X computing in fp32, H100 in bf16); from scripts/precision_sweep.sh.
# usage: gnuplot -e "csv='out/experiments/precision-best.csv'; out='out/reports/precision-sweep'; models='vgg19 resnet-152 gpt2'" reports/precision_sweep.gp
# Columns: node,model,nodes,gbps,best_fp32,images_per_s_fp32,best_bf16,images_per_s_bf16,
# fp32_best_at_bf16,changed. Writes OUT.png and OUT.svg.
set datafile separator ","
set grid
set key top left box font ",8"
set logscale x 2
set xrange [6:40]
set xlabel "nodes"
set ylabel "images/s (best scheme)"
rows(d, m, g) = sprintf("< awk -F, '$1 == \"%s\" && $2 == \"%s\" && $4 == %d' %s", d, m, g, csv)
n = words(models)
nodes = "titanx-fp32 h100-bf16"
do for [fmt in "pngcairo svg"] {
    if (fmt eq "svg") { set terminal svg size 430*n,900 dynamic font ",10"; set output out.".svg" } \
    else { set terminal pngcairo size 430*n,900 font ",10"; set output out.".png" }
    set multiplot layout 2,n title "fp32 or bf16 on the wire: the best scheme and its throughput"
    do for [j = 1:2] {
        d = word(nodes, j)
        do for [i = 1:n] {
            m = word(models, i)
            set title sprintf("%s, %s nodes", m, d)
            plot rows(d, m, 10) using 3:6 with linespoints lw 2 dt 1 pt 7 lc 1 title "10 GbE, fp32", \
                 rows(d, m, 10) using 3:8 with linespoints lw 2 dt 2 pt 6 lc 1 title "10 GbE, bf16", \
                 rows(d, m, 40) using 3:6 with linespoints lw 2 dt 1 pt 5 lc 2 title "40 GbE, fp32", \
                 rows(d, m, 40) using 3:8 with linespoints lw 2 dt 2 pt 4 lc 2 title "40 GbE, bf16", \
                 rows(d, m, 10) using 3:6:(stringcolumn(5)) with labels offset 0,-0.8 font ",7" tc lt 1 notitle, \
                 rows(d, m, 10) using 3:8:(stringcolumn(7)) with labels offset 0,0.8 font ",7" tc lt 1 notitle, \
                 rows(d, m, 40) using 3:6:(stringcolumn(5)) with labels offset 0,-0.8 font ",7" tc lt 2 notitle, \
                 rows(d, m, 40) using 3:8:(stringcolumn(7)) with labels offset 0,0.8 font ",7" tc lt 2 notitle
        }
    }
    unset multiplot
}
