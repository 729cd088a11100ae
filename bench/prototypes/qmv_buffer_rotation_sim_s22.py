#!/usr/bin/env python3
"""Session 22: qmv_family_kernel's control flow at V = 1, transcribed for one thread and run for
every thread of small grids, to check the register-buffer rotations of EXACTQ_QMV_BUFFERS=3 ('b3')
and of EXACTQ_QMV_BUFFERS=3 with EXACTQ_QMV_PARAM_BUFFERS=2 ('lag') beside the default ('b2'):
trips, the split last trip (part, part_rounds), K in several tiles, the carry and
EXACTQ_QMV_STAGE_TWO_ROUNDS. At every step the codes and parameter buffers must hold that task's
chunk; no load may fall outside the row or go to an inactive task; no buffer is left loaded at a
trip's end; each thread's chunks of a task come in increasing order; and over all threads every
chunk of every task is computed exactly once. Host arithmetic only (no GPU).
Usage: python3 bench/prototypes/qmv_buffer_rotation_sim_s22.py  (prints "ok N configs")"""
import itertools, sys
def cdiv(a,b): return (a+b-1)//b
def thread(mode, kCarry, stage2, tasks, grid_x, W, last_split, Kc, tile_chunks, warp, block, lane, l2=1, B=None):
    slots = grid_x*W
    whole_trips = tasks//slots if last_split>1 else cdiv(tasks,slots)
    trips = whole_trips + (1 if tasks > whole_trips*slots else 0)
    rounds_total = cdiv(Kc,32)
    last_part = warp % last_split; last_slot = warp//last_split
    last_part_rounds = cdiv(rounds_total,last_split)
    first_task = warp*grid_x+block
    tiles = cdiv(Kc, tile_chunks)
    st = dict(pointed=None)
    Wb = {}; Pb = {}
    steps = []; waste = []
    def lc(ch,b):
        assert 0 <= ch < Kc, ('code OOB', ch)
        assert st['pointed'] < tasks, ('load for inactive task', st['pointed'])
        if Wb.get(b) is not None: waste.append(('W',b,Wb[b],(st['pointed'],ch)))
        Wb[b]=(st['pointed'],ch)
    def lp(ch,b):
        assert 0 <= ch < Kc, ('param OOB', ch)
        assert st['pointed'] < tasks
        if Pb.get(b) is not None and Pb[b] != (st['pointed'],ch): waste.append(('P',b,Pb[b],(st['pointed'],ch)))
        Pb[b]=(st['pointed'],ch)
    def lr(ch,b): lc(ch,b); lp(ch,b)
    carried=False
    for trip in range(trips):
        split_trip = trip == whole_trips
        split = last_split if split_trip else 1
        part = last_part if split_trip else 0
        part_rounds = last_part_rounds if split_trip else rounds_total
        task = whole_trips*slots + last_slot*grid_x + block if split_trip else first_task + trip*slots
        active = task < tasks
        if not (kCarry and carried): st['pointed']=task
        assert st['pointed']==task
        for tile in range(tiles):
            chunk0 = tile*tile_chunks
            chunks = min(Kc-chunk0, tile_chunks)
            c_end = min(chunks, 32*part_rounds*(part+1))
            c = lane + 32*part_rounds*part if active else c_end
            def step(wb_, pb_, c):
                exp=(task, chunk0+c)
                assert Wb[wb_]==exp and Pb[pb_]==exp, ('wrong buffer', trip, c, wb_, Wb[wb_], pb_, Pb[pb_], exp)
                Wb[wb_]=None; Pb[pb_]=None
                steps.append((task, part, chunk0+c))
            def prefetch(c):
                ahead = c + 32*(B-1+l2)
                if l2>0 and ahead < c_end: assert chunk0+ahead < Kc
            if c < c_end and not (kCarry and carried): lr(chunk0+c,'a')
            second_loaded=False
            if stage2 and (tiles>1 or trip==0) and c+32<c_end: lr(chunk0+c+32,'b'); second_loaded=True
            if mode=='lag':
                if c+32<c_end and not second_loaded and not (kCarry and carried): lc(chunk0+c+32,'b')
                phases=[('a','c','a','b'),('b','a','b','a'),('c','b','a','b'),('a','c','b','a'),('b','a','a','b'),('c','b','b','a')]
                def phase(w,wn,pp,pn):
                    nonlocal c
                    if c+64<c_end: lc(chunk0+c+64,wn)
                    if c+32<c_end: lp(chunk0+c+32,pn)
                    prefetch(c); step(w,pp,c); c+=32
                    return c<c_end
                if c<c_end:
                    go=True
                    while go:
                        for ph in phases:
                            if not phase(*ph): go=False; break
            elif mode=='b3':
                if c+32<c_end and not second_loaded and not (kCarry and carried): lr(chunk0+c+32,'b')
                while c<c_end:
                    if c+64<c_end: lr(chunk0+c+64,'c')
                    prefetch(c); step('a','a',c); c+=32
                    if c>=c_end: break
                    if c+64<c_end: lr(chunk0+c+64,'a')
                    prefetch(c); step('b','b',c); c+=32
                    if c>=c_end: break
                    if c+64<c_end: lr(chunk0+c+64,'b')
                    prefetch(c); step('c','c',c); c+=32
            else:
                while c<c_end:
                    if c+32<c_end and not second_loaded: lr(chunk0+c+32,'b')
                    second_loaded=False
                    prefetch(c); step('a','a',c); c+=32
                    if c>=c_end: break
                    if c+32<c_end: lr(chunk0+c+32,'a')
                    prefetch(c); step('b','b',c); c+=32
        # all buffers consumed at trip end?
        left=[(k,v) for k,v in list(Wb.items())+list(Pb.items()) if v is not None]
        assert not left, ('unconsumed at trip end', trip, left)
        if kCarry:
            carried = tiles==1 and trip+1<trips and trip+1!=whole_trips
            if carried:
                nxt = task+slots
                st['pointed']=nxt
                if nxt<tasks and lane<Kc: lr(lane,'a')
                if mode=='lag':
                    if nxt<tasks and lane+32<Kc: lc(lane+32,'b')
                elif mode=='b3':
                    if nxt<tasks and lane+32<Kc: lr(lane+32,'b')
    left=[(k,v) for k,v in list(Wb.items())+list(Pb.items()) if v is not None]
    assert not left, ('unconsumed at end', left)
    return steps, waste

def check(mode,kCarry,stage2,tasks,grid_x,W,last_split,Kc,tile_chunks):
    B = 2 if mode=='b2' else 3
    if last_split>1 and (W%last_split or Kc>tile_chunks or cdiv(Kc,32)<last_split): return 0
    slots=grid_x*W
    if grid_x>tasks: return 0
    if last_split>1 and not (tasks%slots>0 and (tasks%slots)*last_split<=slots): return 0
    per_task={}
    nw=0
    for warp in range(W):
        for block in range(grid_x):
            for lane in range(32):
                steps,waste=thread(mode,kCarry,stage2,tasks,grid_x,W,last_split,Kc,tile_chunks,warp,block,lane,B=B)
                nw+=len(waste)
                # per (task) the order within this thread increasing
                bytask={}
                for t,pt,ch in steps: bytask.setdefault(t,[]).append(ch)
                for t,l in bytask.items():
                    assert l==sorted(l) and len(set(l))==len(l)
                    per_task.setdefault(t,[]).extend((lane,ch) for ch in l)
    assert set(per_task)==set(range(tasks)), ('tasks',sorted(per_task),tasks)
    for t,l in per_task.items():
        exp=sorted((ch%32,ch) for ch in range(Kc))
        assert sorted(l)==exp, ('task chunks',t)
    return nw

n=0; wastes=0
for mode in ('b2','b3','lag'):
  for kCarry in (False,True):
    for stage2 in (False,True):
      for W,grid_x in ((4,1),(4,2),(8,1)):
        for last_split in (1,2,4):
          for tasks in range(1, 3*W*grid_x+2):
            for Kc,tile_chunks in ((1,64),(5,64),(31,64),(32,64),(33,64),(63,64),(64,64),(65,96),(96,128),(97,128),(128,128),(150,160),(160,160),(192,192),(200,224),(224,224),(256,256),(300,320),
                                   (100,64),(200,64),(230,96),(70,32)):
              if Kc>tile_chunks and last_split>1: continue
              try:
                  wastes+=check(mode,kCarry,stage2,tasks,grid_x,W,last_split,Kc,tile_chunks); n+=1
              except AssertionError as e:
                  print('FAIL',mode,kCarry,stage2,W,grid_x,last_split,tasks,Kc,tile_chunks,e); sys.exit(1)
print('ok',n,'configs; wasted loads',wastes)
