#!/usr/bin/env python3
"""Session 22: the register-buffer rotations of qmv_family.cuh (EXACTQ_QMV_BUFFERS=3, and with
EXACTQ_QMV_PARAM_BUFFERS=2) simulated on the host, as written in the kernel: every chunk lane, lane + 32,
... below the run end is stepped once, in increasing order, from a buffer whose codes and parameters
were loaded for that chunk, with and without the carry. Usage: python3 bench/prototypes/qmv_buffer_rotation_sim_s22.py"""
def run(mode, c, c_end, carried):
    W = {}; P = {}
    log = []
    def lc(ch, b): W[b] = ch
    def lp(ch, b): P[b] = ch
    if carried:
        if c < c_end: lc(c,'a'); lp(c,'a')
        if c + 32 < c_end: lc(c+32,'b'); (lp(c+32,'b') if mode=='b3' else None)
    else:
        if c < c_end: lc(c,'a'); lp(c,'a')
    if mode == 'b3':
        if c + 32 < c_end and not carried: lc(c+32,'b'); lp(c+32,'b')
        while c < c_end:
            for now, nxt in (('a','c'),('b','a'),('c','b')):
                if c + 64 < c_end: lc(c+64,nxt); lp(c+64,nxt)
                assert W[now]==c and P[now]==c, (mode,c,W,P)
                log.append(c); W[now]=None; P[now]=None
                c += 32
                if c >= c_end: break
            else: continue
            break
    else:
        if c + 32 < c_end and not carried: lc(c+32,'b')
        phases=[('a','c','a','b'),('b','a','b','a'),('c','b','a','b'),('a','c','b','a'),('b','a','a','b'),('c','b','b','a')]
        def phase(w, wn, p, pn):
            nonlocal c
            if c + 64 < c_end: lc(c+64, wn)
            if c + 32 < c_end: lp(c+32, pn)
            assert W[w]==c and P[p]==c, (mode,c,W,P,w,p)
            log.append(c); W[w]=None; P[p]=None
            c += 32
            return c < c_end
        go = c < c_end  # the kernel's `if (c < c_end)`: without it an empty run would step once
        while go:
            for ph in phases:
                if not phase(*ph): go=False; break
    return log
for mode in ('b3','b3p'):
    for lane in (0,5,31):
        for c_end in range(0, 600, 7):
            for carried in (False, True):
                if lane >= c_end and carried: pass
                log = run(mode, lane, c_end, carried)
                assert log == list(range(lane, c_end, 32)), (mode, lane, c_end, log)
print("ok")
