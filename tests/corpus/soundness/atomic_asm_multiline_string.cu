extern "C" __global__ void asm_lines(unsigned long long* total) {
    asm volatile("{\n"
                 "  .reg .u64 one;\n"
                 "  mov.u64 one, 1;\n"
                 "  atom.global.add.u64 one, [%0], one;\n"
                 "}\n" :: "l"(total) : "memory");  // expect: PC305
}
