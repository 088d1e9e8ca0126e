/* Fuzz the ONNX importer (onnx/): the bytes are a .onnx file. A refused file is one line
 * naming it; an imported one is a .net description that parses back with the layers'
 * invariants, since `poseidon model import` writes it for the other commands to read. */
#include "tests/fuzz/fuzz.h"

#include "core/model.h"
#include "onnx/onnx_import.h"

int fuzz_onnx(const uint8_t *data, size_t size)
{
    char *text = NULL, err[2048] = "";
    if (onnx_import_buffer("fuzz.onnx", data, size, NULL, &text, err, sizeof err) != 0) {
        fuzz_check_error(err);
        FUZZ_ASSERT(!strncmp(err, "fuzz.onnx: ", 11), "'%s' does not name the file", err);
        FUZZ_ASSERT(!strchr(err, '\n'), "'%s' spans lines", err);
        FUZZ_ASSERT(text == NULL, "a refused import returned text");
        return 0;
    }
    model_t m;
    char perr[1024] = "";
    int rc = model_parse(&m, "fuzz.net", text, strlen(text), perr, sizeof perr);
    FUZZ_ASSERT(rc == 0, "the imported description does not parse: %s", perr);
    FUZZ_ASSERT(m.n_layers >= 2 && layer_is_input(&m.layers[0]), "%d layers", m.n_layers);
    int64_t params = 0;
    for (int i = 0; i < m.n_layers; i++) {
        const layer_t *l = &m.layers[i];
        FUZZ_ASSERT(l->params >= 0 && l->fwd_flops >= 0 && l->bwd_flops >= 0 &&
                        l->act_bytes >= 0,
                    "%s: a negative cost", l->name);
        params += l->params;
    }
    FUZZ_ASSERT(params == m.total_params, "total %lld", (long long)m.total_params);
    model_fini(&m);
    free(text);
    return 1;
}

FUZZ_LIBFUZZER_ENTRY(fuzz_onnx)
