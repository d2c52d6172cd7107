/* fuzz_hf_config: a Hugging Face config.json (model/model_hf.h, through model_load) under
 * libFuzzer: the input is the file, checked as fuzz_model.h says (an architecture fuyou does
 * not compute is one line naming the field). */
#include "fuzz_model.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_model_file("config.json", data, size);
}
