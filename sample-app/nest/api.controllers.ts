/**
 * The host's REST API: its own services, each publishing through the injected hub. Behind the global
 * bearer guard like every route; bodies are validated by class-validator DTOs.
 */
import {
  Body,
  Controller,
  Delete,
  Get,
  HttpCode,
  HttpStatus,
  Inject,
  NotFoundException,
  Param,
  Post,
  Put,
  Res,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { Response } from 'express';
import type { FastifyReply } from 'fastify';
import { SubscriptionHub } from 'mcp-subscriptions';
import { sampleStats, type SampleStats } from '../shared/bus.ts';
import { CatalogService, isCatalogName } from '../shared/catalog-service.ts';
import { NotesService, type Note } from '../shared/notes-service.ts';
import { TasksService } from '../shared/tasks-service.ts';
import type { TaskState } from 'mcp-subscriptions';
import { Principal } from './bearer-auth.guard.ts';
import { SampleBusProvider } from './config.ts';
import { PutNoteDto, TaskStatusDto, validBody } from './dto.ts';

@Controller('api/notes')
export class NotesController {
  constructor(
    @Inject(NotesService) private readonly notes: NotesService,
    @Inject(HttpAdapterHost) private readonly adapterHost: HttpAdapterHost,
  ) {}

  /** 201 when the note is created, 200 when it is replaced. */
  @Put(':owner/:name')
  put(
    @Principal() principal: string,
    @Param('owner') owner: string,
    @Param('name') name: string,
    @Body(validBody(PutNoteDto)) body: PutNoteDto,
    @Res({ passthrough: true }) res: Response | FastifyReply,
  ): Note {
    const { created, note } = this.notes.put(principal, owner, name, body);
    this.adapterHost.httpAdapter.status(res, created ? HttpStatus.CREATED : HttpStatus.OK);
    return note;
  }

  @Delete(':owner/:name')
  @HttpCode(HttpStatus.NO_CONTENT)
  delete(@Principal() principal: string, @Param('owner') owner: string, @Param('name') name: string): void {
    this.notes.delete(principal, owner, name);
  }
}

@Controller('api/catalog')
export class CatalogController {
  constructor(@Inject(CatalogService) private readonly catalog: CatalogService) {}

  @Post(':catalog')
  @HttpCode(HttpStatus.ACCEPTED)
  changed(@Param('catalog') catalog: string): { notified: string } {
    if (!isCatalogName(catalog)) throw new NotFoundException();
    return { notified: this.catalog.changed(catalog) };
  }
}

@Controller('api/tasks')
export class TasksController {
  constructor(@Inject(TasksService) private readonly tasks: TasksService) {}

  @Post()
  create(@Principal() principal: string): TaskState {
    return this.tasks.create(principal);
  }

  @Post(':taskId/status')
  @HttpCode(HttpStatus.OK)
  setStatus(
    @Principal() principal: string,
    @Param('taskId') taskId: string,
    @Body(validBody(TaskStatusDto)) body: TaskStatusDto,
  ): TaskState {
    return this.tasks.setStatus(principal, taskId, body);
  }
}

@Controller('api/subscriptions')
export class StatsController {
  constructor(
    @Inject(SubscriptionHub) private readonly hub: SubscriptionHub,
    @Inject(SampleBusProvider) private readonly bus: SampleBusProvider,
  ) {}

  /** The hub's statistics, and under `bus` the Redis or PostgreSQL bus's counters when one is in use. */
  @Get('stats')
  stats(): SampleStats {
    return sampleStats(this.hub.stats(), this.bus.sample);
  }
}
