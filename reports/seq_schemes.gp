# Which scheme hybrid gives the layers of BERT-base and GPT-2 (124M) as the sequence grows:
# the share of parameter layers synced by SFB, per node count, from scripts/seq_schemes.sh;
# solid: the iteration rule (the default), dashed: Poseidon's per-layer rule at 8 nodes.
# usage: gnuplot -e "csv='out/seq/schemes.csv'; out='out/reports/seq-schemes'" reports/seq_schemes.gp
# Columns: model,seq,nodes,layers_ps,layers_sfb,layers_allreduce,hybrid_rule. Writes OUT.png
# and OUT.svg.
set datafile separator ","
set grid
set key top right box
set bmargin 4
set logscale x 2
set xlabel "sequence length S (batch 8 per worker: 8 S tokens)"
set ylabel "parameter layers on SFB (%)"
set yrange [0:100]
set title "hybrid (PS or SFB per layer), Titan X nodes, 40 GbE: SFB only while tokens and nodes are few"
rows(m, n, r) = sprintf("< awk -F, '$1 == \"%s\" && $3 == %s && $7 == \"%s\"' %s", m, n, r, csv)
do for [fmt in "pngcairo svg"] {
    if (fmt eq "svg") { set terminal svg size 820,560 dynamic; set output out.".svg" } \
    else { set terminal pngcairo size 820,560; set output out.".png" }
    plot for [n in "2 8 32"] rows("bert-base", n, "iteration") using 2:(100.0 * $5 / ($4 + $5 + $6)) \
             with linespoints lw 2 dt 1 pt 7 title sprintf("BERT-base, %s nodes", n), \
         for [n in "2 8 32"] rows("gpt2", n, "iteration") using 2:(100.0 * $5 / ($4 + $5 + $6)) \
             with linespoints lw 2 dt 1 pt 5 title sprintf("GPT-2, %s nodes", n), \
         rows("bert-base", "8", "layer") using 2:(100.0 * $5 / ($4 + $5 + $6)) \
             with linespoints lw 1 dt 2 pt 6 title "BERT-base, 8 nodes, per-layer rule", \
         rows("gpt2", "8", "layer") using 2:(100.0 * $5 / ($4 + $5 + $6)) \
             with linespoints lw 1 dt 2 pt 4 title "GPT-2, 8 nodes, per-layer rule"
}
